#include "cp/api/agent_selector.h"

#include <algorithm>
#include <cctype>

namespace faultline::cp {
namespace {

bool label_char(char c, bool in_key) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || (in_key && c == '/');
}

const std::vector<FieldRule> kSelectorFields = {
    {"all", JsonType::Boolean}, {"hostnames", JsonType::Array}, {"labels", JsonType::Object}};

}  // namespace

std::string label_key_problem(const std::string& key) {
  if (key.empty() || key.size() > 63) return "a label key is 1-63 characters";
  if (!std::isalnum(static_cast<unsigned char>(key[0]))) return "a label key starts with a letter or a digit";
  for (char c : key)
    if (!label_char(c, true)) return "a label key is letters, digits and . _ - /";
  return "";
}

std::string label_value_problem(const std::string& value) {
  if (value.size() > 63) return "a label value is at most 63 characters";
  for (char c : value)
    if (!label_char(c, false)) return "a label value is letters, digits and . _ -";
  return "";
}

std::optional<ApiError> check_labels(const nlohmann::json& labels, const std::string& path) {
  if (!labels.is_object()) return ApiError{400, path, "must be an object of strings"};
  if (labels.size() > kMaxLabels) return ApiError{400, path, "has more than 32 labels"};
  for (const auto& [key, value] : labels.items()) {
    const std::string field = path + "." + key;
    if (auto why = label_key_problem(key); !why.empty()) return ApiError{400, field, why};
    if (!value.is_string()) return ApiError{400, field, "must be a string"};
    if (auto why = label_value_problem(value.get<std::string>()); !why.empty()) return ApiError{400, field, why};
  }
  return std::nullopt;
}

std::variant<AgentSelector, ApiError> parse_selector(const nlohmann::json& sel, const std::string& path) {
  if (!sel.is_object()) return ApiError{400, path, "must be an object"};
  if (auto e = check_fields(sel, kSelectorFields, path + ".")) return *e;
  AgentSelector out;
  if (sel.contains("all")) {
    if (!sel["all"].get<bool>()) return ApiError{400, path + ".all", "must be true"};
    if (sel.size() != 1) return ApiError{400, path, "all takes no hostnames or labels beside it"};
    out.all = true;
    return out;
  }
  if (sel.empty()) return ApiError{400, path, "takes all, hostnames or labels"};
  if (sel.contains("hostnames")) {
    const auto& names = sel["hostnames"];
    if (names.empty() || names.size() > kMaxSelectorHostnames)
      return ApiError{400, path + ".hostnames", "must list 1-1000 names"};
    for (size_t i = 0; i < names.size(); ++i) {
      if (!names[i].is_string() || names[i].get<std::string>().empty())
        return ApiError{400, path + ".hostnames[" + std::to_string(i) + "]", "must be a non-empty string"};
      out.hostnames.push_back(names[i].get<std::string>());
    }
  }
  if (sel.contains("labels")) {
    const auto& labels = sel["labels"];
    if (labels.empty()) return ApiError{400, path + ".labels", "must name at least one label"};
    if (auto e = check_labels(labels, path + ".labels")) return *e;
    for (const auto& [k, v] : labels.items()) out.labels[k] = v.get<std::string>();
  }
  return out;
}

bool AgentSelector::matches(const Agent& a) const {
  if (all) return true;
  if (!hostnames.empty() && std::find(hostnames.begin(), hostnames.end(), a.hostname) == hostnames.end()) return false;
  if (labels.empty()) return true;
  auto have = nlohmann::json::parse(a.labels, nullptr, false);
  if (have.is_discarded() || !have.is_object()) return false;
  for (const auto& [k, v] : labels)
    if (!have.contains(k) || !have[k].is_string() || have[k].get<std::string>() != v) return false;
  return true;
}

nlohmann::json AgentSelector::to_json() const {
  if (all) return {{"all", true}};
  nlohmann::json j = nlohmann::json::object();
  if (!hostnames.empty()) j["hostnames"] = hostnames;
  if (!labels.empty()) j["labels"] = labels;
  return j;
}

}  // namespace faultline::cp
