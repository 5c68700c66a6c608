// Error envelopes and the field checks.
#include "cp/api/api_error.h"

namespace faultline::cp {
namespace {

const char* type_name(JsonType t) {
  switch (t) {
    case JsonType::String:
      return "a string";
    case JsonType::Integer:
      return "an integer";
    case JsonType::Number:
      return "a number";
    case JsonType::Boolean:
      return "true or false";
    case JsonType::Object:
      return "an object";
    case JsonType::Array:
      return "an array";
  }
  return "?";
}

bool has_type(const nlohmann::json& v, JsonType t) {
  switch (t) {
    case JsonType::String:
      return v.is_string();
    case JsonType::Integer:
      return v.is_number_integer();
    case JsonType::Number:
      return v.is_number();
    case JsonType::Boolean:
      return v.is_boolean();
    case JsonType::Object:
      return v.is_object();
    case JsonType::Array:
      return v.is_array();
  }
  return false;
}

}  // namespace

HttpReply api_error(int status, std::string_view message, std::string_view field) {
  nlohmann::json j{{"error", message}, {"status", status}};
  if (!field.empty()) j["field"] = field;
  return HttpReply::json(status, j.dump());
}

HttpReply api_json(int status, const nlohmann::json& body) { return HttpReply::json(status, body.dump()); }

std::variant<nlohmann::json, ApiError> parse_body(const std::string& body, bool empty_ok) {
  if (body.empty()) {
    if (empty_ok) return nlohmann::json::object();
    return ApiError{400, "body", "a JSON object is required"};
  }
  try {
    auto j = nlohmann::json::parse(body);
    if (!j.is_object()) return ApiError{400, "body", "must be a JSON object"};
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    return ApiError{400, "body", "malformed JSON at byte " + std::to_string(e.byte)};
  } catch (const nlohmann::json::exception& e) {
    // A number out of range (1e999) is out_of_range, not parse_error (found by cp_body_fuzz).
    return ApiError{400, "body", "unreadable JSON: a number out of range"};
  }
}

std::optional<ApiError> check_fields(const nlohmann::json& obj, const std::vector<FieldRule>& rules,
                                     const std::string& path) {
  for (const auto& [key, value] : obj.items()) {
    const FieldRule* rule = nullptr;
    for (const auto& r : rules)
      if (key == r.name) rule = &r;
    // An empty member name is named as "" (a field that names nothing helps no one).
    if (rule == nullptr) return ApiError{400, path + (key.empty() ? "\"\"" : key), "unknown field"};
    if (!has_type(value, rule->type)) return ApiError{400, path + key, std::string("must be ") + type_name(rule->type)};
  }
  for (const auto& r : rules)
    if (r.required && !obj.contains(r.name)) return ApiError{400, path + r.name, "is required"};
  return std::nullopt;
}

bool is_yaml_type(const std::optional<std::string>& type) {
  if (!type) return false;
  const std::string t = type->substr(0, type->find(';'));
  return t == "application/yaml" || t == "application/x-yaml" || t == "text/yaml" || t == "text/x-yaml";
}

}  // namespace faultline::cp
