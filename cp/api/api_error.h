// The API's error replies and the strict reading of JSON request bodies:
// malformed JSON, a field of the wrong type, an unknown or missing field are
// each a 400 that names the field, before anything is stored.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "userspace/net/http_request.h"

namespace faultline::cp {

// {"error": message, "status": status, "field": field} (field only when one is named).
[[nodiscard]] HttpReply api_error(int status, std::string_view message, std::string_view field = "");
[[nodiscard]] HttpReply api_json(int status, const nlohmann::json& body);
// Whether a Content-Type is YAML's (application/yaml, text/yaml, their x- forms).
[[nodiscard]] bool is_yaml_type(const std::optional<std::string>& type);

struct ApiError {
  int status = 400;
  std::string field;  // "spec.delay_ms"; empty when the body as a whole is wrong
  std::string message;
  std::string flag;  // "--delay": the faultctl flag that spells the field, named after it
  [[nodiscard]] HttpReply reply() const {
    const std::string named = flag.empty() ? field : field + " (" + flag + ")";
    return api_error(status, field.empty() ? message : named + ": " + message, field);
  }
};

enum class JsonType { String, Integer, Number, Boolean, Object, Array };

struct FieldRule {
  const char* name;
  JsonType type;
  bool required = false;
};

// The body as a JSON object, or why not. An empty body is an empty object
// only when `empty_ok`.
[[nodiscard]] std::variant<nlohmann::json, ApiError> parse_body(const std::string& body, bool empty_ok = false);
// Every member is one of `rules`, of its type; every required one is there.
// `path` prefixes the field names ("spec.").
[[nodiscard]] std::optional<ApiError> check_fields(const nlohmann::json& obj, const std::vector<FieldRule>& rules,
                                                   const std::string& path = "");

}  // namespace faultline::cp
