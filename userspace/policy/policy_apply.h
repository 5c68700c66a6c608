// faultctl policy apply / delete / export: a policy's egress section written
// into the kernel for the host (`all`, the root cgroup) and for cgroups, as a
// new generation beside the live one and switched by one write; pinned, so it
// works with no faultctl or faultd running. See docs/policy.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "loader/bpffs.h"
#include "userspace/policy/policy.h"
#include "userspace/policy/policy_diff.h"

namespace faultline {

// The applied policy: the live generation's canonical text (policy_json_text),
// parsed again. Nothing applied: nullopt.
struct LivePolicy {
  std::string source;
  Policy policy;
  uint32_t generation = 0;
};
[[nodiscard]] Result<std::optional<LivePolicy>> read_live_policy(const BpffsLayout& layout);

struct ApplyOutcome {
  bool changed = false;
  std::vector<EgressChange> changes;  // against what was live
  size_t scopes = 0;                  // applied scopes after (before, for a dry run: after it would be)
  uint32_t generation = 0;            // live after
};

// Checks what apply would refuse, touching nothing: a policy with spec.faults
// (apply runs no experiments), a cgroup that does not exist, maps that would
// overflow. Bad input errors. Off this host (faultcp judging a bundle for its
// agents) the cgroups are not looked for: they are the agents' to find.
[[nodiscard]] Status check_appliable(const Policy& p, bool on_this_host = true);

// Applies p.egress (which must be present): the scopes of the file replace the
// live ones, scopes no longer in it are removed, `egress: []` removes them all.
// The same file again changes nothing. dry_run: what would change, nothing done.
[[nodiscard]] Result<ApplyOutcome> apply_policy(const BpffsLayout& layout, const Policy& p, bool dry_run);
// Deletes the learned addresses (host rules) whose every name has expired, in
// every applied scope; how many. apply does it too; faultd every minute.
[[nodiscard]] Result<size_t> reap_learned_addresses(const BpffsLayout& layout);
// Removes the applied policy (every scope and pin); nothing applied: unchanged.
[[nodiscard]] Result<ApplyOutcome> delete_policy(const BpffsLayout& layout, bool dry_run);

// One line per applied scope for status: "all: enforce, default allow, ...
// (policy NAME, 3 rules) allowed 5 denied 1 would_deny 0".
[[nodiscard]] std::vector<std::string> applied_policy_lines(const BpffsLayout& layout);

}  // namespace faultline
