// Two egress sections compared rule by rule (faultctl policy diff, and what
// apply reports), and recorded decisions replayed through a policy
// (diff --simulate): what would now be denied or allowed that was not.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/policy/policy.h"

namespace faultline {

struct EgressChange {
  enum class Kind { ScopeAdded, ScopeRemoved, ScopeChanged, RuleAdded, RuleRemoved, RuleChanged };
  Kind kind;
  std::string scope;  // EgressScope::label()
  std::string rule;   // rule name; empty for a scope change
  std::string was, now;
};

// Scopes matched by label, rules by name within a scope; in the order of
// `next` (removals after, in the order of `live`).
[[nodiscard]] std::vector<EgressChange> diff_egress(const std::vector<EgressScope>& live,
                                                    const std::vector<EgressScope>& next);
// One line per change ("+ scope all: ...", "- rule ...", "~ rule ...: was ...; now ...").
[[nodiscard]] std::string diff_text(const std::vector<EgressChange>& changes);

// One decision of a guard's --json-log.
struct RecordedDecision {
  std::string op;  // connect, sendmsg
  fl_addr addr{};
  uint16_t port = 0;
  uint8_t proto = 0;
  bool allowed = true;      // allow or redirect; deny and would-deny are not
  std::string destination;  // as logged
};

// The decisions of a --json-log text; lines of other verdicts (injections,
// the exfil cap) are skipped. A line that is not a decision is an error
// naming its line number.
[[nodiscard]] Result<std::vector<RecordedDecision>> read_decision_log(std::string_view text);

struct SimulatedFlip {
  std::string destination;  // "10.0.0.5:443/tcp"
  bool now_allowed = false;
  uint64_t count = 0;
  std::string decided_by;  // "rule NAME" or "default deny"
};

struct Simulation {
  uint64_t decisions = 0;
  uint64_t unchanged = 0;
  uint64_t unjudged = 0;             // no scope of the policy covers the cgroup
  std::vector<SimulatedFlip> flips;  // busiest first
};

// Each decision judged again by `scopes` as a call from cgroup_path.
[[nodiscard]] Simulation simulate_decisions(const std::vector<RecordedDecision>& log,
                                            const std::vector<EgressScope>& scopes, std::string_view cgroup_path);
[[nodiscard]] std::string simulation_text(const Simulation& s);

}  // namespace faultline
