// Which agents of a workspace something is for: an experiment (one per agent
// selected) or the policy bundle. {"all": true}, or hostnames (any of them)
// and/or labels (every one of them), both when both are given. Also the rules
// of an agent's labels (faultd --label KEY=VALUE).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "cp/api/api_error.h"
#include "cp/storage/store.h"

namespace faultline::cp {

inline constexpr size_t kMaxLabels = 32;
inline constexpr size_t kMaxSelectorHostnames = 1000;

struct AgentSelector {
  bool all = false;
  std::vector<std::string> hostnames;         // the agent's hostname is one of them (none: any)
  std::map<std::string, std::string> labels;  // the agent carries every one of them
  [[nodiscard]] bool matches(const Agent& a) const;
  [[nodiscard]] nlohmann::json to_json() const;
};

// `sel` as given in a body at `path` ("selector"): 400 naming the member at fault.
[[nodiscard]] std::variant<AgentSelector, ApiError> parse_selector(const nlohmann::json& sel, const std::string& path);

// An agent's labels: a JSON object of at most 32 members; keys 1-63 of
// [A-Za-z0-9._/-] starting with a letter or digit, values 0-63 of [A-Za-z0-9._-].
[[nodiscard]] std::optional<ApiError> check_labels(const nlohmann::json& labels, const std::string& path);
// The same rule for one key or value ("" when good, else why not).
[[nodiscard]] std::string label_key_problem(const std::string& key);
[[nodiscard]] std::string label_value_problem(const std::string& value);

}  // namespace faultline::cp
