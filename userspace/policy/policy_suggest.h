// faultctl policy suggest: a default-deny allow-list proposed from recorded
// traffic (a guard's --json-log decisions, `faultctl top --json` samples), one
// allow rule per destination, rare destinations flagged for review.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/policy/policy.h"

namespace faultline {

struct SuggestOptions {
  std::string name = "suggested-egress";
  std::string cgroup;              // the scope: "" = all: true
  std::optional<double> window_s;  // only records at most this old (they need a "time")
  double now_s = 0;                // wall clock seconds, for the window
};

struct Suggestion {
  Policy policy;
  uint64_t records = 0;  // decisions and flow rows read
  uint64_t outside_window = 0;
  uint64_t denied = 0;  // enforced denials: not proposed
  size_t rare = 0;
};

// Reads every line of every log (JSON lines: guard decisions, or top --json
// documents); an unreadable line is a bad-input error naming its file and line.
[[nodiscard]] Result<Suggestion> suggest_policy(const std::vector<std::pair<std::string, std::string>>& logs,
                                                const SuggestOptions& o);

// The policy as a file to review: a comment header, then policy_yaml_text().
[[nodiscard]] std::string suggestion_text(const Suggestion& s, const std::vector<std::string>& sources);

}  // namespace faultline
