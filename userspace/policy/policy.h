// The policy file (faultline.dev/v1, kind Policy): its model, the parser that
// reads it from YAML or JSON with a line:column for every error, and the
// precedence rule that decides one call against it. Its guard section's model
// is the guard's own (userspace/guard), read here with the rest of the file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/units.h"
#include "userspace/guard/guard_policy.h"
#include "userspace/net/address.h"
#include "userspace/net/egress_rules.h"

namespace faultline {

inline constexpr std::string_view kPolicyApiVersion = "faultline.dev/v1";
inline constexpr std::string_view kPolicyKind = "Policy";

// Where something is in the file, 1-based (0 when unknown).
struct SourceMark {
  int line = 0;
  int column = 0;
};

// One error: "FILE:LINE:COLUMN: FIELD.PATH: reason".
struct PolicyDiagnostic {
  SourceMark mark;
  std::string path;  // "spec.egress[0].rules[2].cidr"; "<document>" for the file as a whole
  std::string reason;
  [[nodiscard]] std::string render(std::string_view file) const;
};

enum class PolicyMode { Monitor, Enforce };

// One egress rule as written. Exactly one of cidr and host is set.
struct PolicyRule {
  std::string name;
  Verdict action = Verdict::Allow;
  std::optional<Prefix> cidr;
  std::string host;              // "api.example.com" or "*.example.com" (lowercase, no trailing dot)
  std::vector<PortRange> ports;  // empty: any port
  uint8_t proto = 0;             // 0 any, IPPROTO_TCP, IPPROTO_UDP
  std::string reason;
  SourceMark mark;
  SourceMark name_mark;  // of the name's value
  [[nodiscard]] bool wildcard() const { return host.starts_with("*."); }
};

// One egress scope: a cgroup (and every cgroup below it) or the whole host.
struct EgressScope {
  bool host_wide = false;  // `all: true`
  std::string cgroup;      // `cgroup: PATH`, below the cgroup2 root ("/system.slice/web.service")
  PolicyMode mode = PolicyMode::Monitor;
  bool default_allow = true;
  int deny_errno = 1;      // EPERM
  uint64_t exfil_cap = 0;  // bytes; 0 = off
  // Host rules: the TTL of an address learned from a DNS answer, clamped to
  // [dns_ttl_min, dns_ttl_max] seconds (docs/policy.md, "Host rules").
  uint32_t dns_ttl_min = 30;
  uint32_t dns_ttl_max = 3600;
  std::vector<PolicyRule> rules;
  SourceMark mark;
  // "all" or "cgroup /system.slice/web.service"
  [[nodiscard]] std::string label() const;
};

// One field of an experiment: the `faultctl run` flag of the same name and its
// value(s) as written. A list repeats the flag; `true` is a switch.
struct FaultField {
  std::string name;
  std::vector<std::string> values;
  bool is_switch = false;  // written as true
  bool is_list = false;
  SourceMark mark;  // of the key
  std::vector<SourceMark> value_marks;
};

// One experiment as data: what `faultctl run KIND --FIELD VALUE ...` would run.
struct FaultEntry {
  std::string name;
  std::string kind;                  // loss, latency, ..., syscall, process, cpu, memory, disk
  std::vector<FaultField> fields;    // in the order written
  std::vector<std::string> command;  // syscall faults: the command after "--"
  SourceMark mark;
  SourceMark kind_mark;
};

struct Policy {
  std::string name;
  std::optional<std::vector<EgressScope>> egress;  // absent: the live egress policy is left alone
  std::optional<std::vector<FaultEntry>> faults;   // absent: the live experiments are left alone
  // spec.guard: the AI-agent guard's request rules (userspace/guard), read by
  // a guard at start; policy apply leaves it to the guard.
  std::optional<GuardPolicy> guard;
};

// Checks one experiment's fields the way `faultctl run` checks its flags; path
// is "spec.faults[N]". The CLI supplies it (the run parsers live with the CLI).
using FaultChecker = std::function<std::vector<PolicyDiagnostic>(const FaultEntry&, const std::string& path)>;

struct PolicyParse {
  Policy policy;
  std::vector<PolicyDiagnostic> errors;  // sorted by line, column; empty: valid
  [[nodiscard]] bool ok() const { return errors.empty(); }
};

// Reads a policy from YAML or JSON text (JSON is read as YAML). Every error is
// collected, not just the first. Also refuses what the compiler would refuse
// (more than 8 rules of one action overlapping on one prefix). With a checker,
// each experiment is checked too.
[[nodiscard]] PolicyParse parse_policy(std::string_view text, const FaultChecker& check_fault = {});

// The text of a policy file ("-": stdin), refused past kMaxPolicyBytes.
inline constexpr size_t kMaxPolicyBytes = 16 << 20;
[[nodiscard]] Result<std::string> read_policy_text(const std::string& file);

// The known field names of one level of the file, for "did you mean".
[[nodiscard]] std::string closest_name(std::string_view wrong, const std::vector<std::string>& known);

// Precedence, as the policy means it. For a call from cgroup `cgroup_path`
// (below the cgroup2 root; "/" is the root): the most specific scope decides,
// the cgroup scope with the longest path equal to or above it, else `all`.
// Within the scope: a matching deny rule denies, else a matching allow rule
// allows, else the scope's default. Host rules match no address here (they are
// matched by name, which an address alone does not give).
struct PolicyDecision {
  const EgressScope* scope = nullptr;  // nullptr: no scope covers the cgroup (allowed, unjudged)
  const PolicyRule* rule = nullptr;    // nullptr: the default decided
  bool allowed = true;
  bool enforced = false;  // the scope is in enforce mode (else: reported only)
};
[[nodiscard]] const EgressScope* scope_for(const std::vector<EgressScope>& scopes, std::string_view cgroup_path);
[[nodiscard]] PolicyDecision decide(const std::vector<EgressScope>& scopes, std::string_view cgroup_path,
                                    const fl_addr& addr, uint16_t port, uint8_t proto);

}  // namespace faultline
