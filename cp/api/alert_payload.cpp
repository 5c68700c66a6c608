// Alertmanager's webhook payload, member by member (the body was parsed by
// parse_body; this judges its shape).
#include "cp/api/alert_payload.h"

namespace faultline::cp {
namespace {

// Alertmanager's webhook payload (version 4), every member it sends.
const std::vector<FieldRule> kAlertBodyFields = {
    {"version", JsonType::String},      {"groupKey", JsonType::String},          {"truncatedAlerts", JsonType::Integer},
    {"status", JsonType::String},       {"receiver", JsonType::String},          {"groupLabels", JsonType::Object},
    {"commonLabels", JsonType::Object}, {"commonAnnotations", JsonType::Object}, {"externalURL", JsonType::String},
    {"alerts", JsonType::Array, true},
};
const std::vector<FieldRule> kAlertFields = {
    {"status", JsonType::String},      {"labels", JsonType::Object, true}, {"annotations", JsonType::Object},
    {"startsAt", JsonType::String},    {"endsAt", JsonType::String},       {"generatorURL", JsonType::String},
    {"fingerprint", JsonType::String},
};
constexpr size_t kMaxAlerts = 1000;

std::optional<ApiError> check_string_map(const nlohmann::json& obj, const std::string& path) {
  for (const auto& [k, v] : obj.items())
    if (!v.is_string()) return ApiError{400, path + "." + (k.empty() ? "\"\"" : k), "must be a string"};
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> check_alert_payload(const nlohmann::json& j) {
  if (auto e = check_fields(j, kAlertBodyFields)) return e;
  for (const char* m : {"groupLabels", "commonLabels", "commonAnnotations"})
    if (j.contains(m))
      if (auto e = check_string_map(j[m], m)) return e;
  if (j.contains("status") && j["status"] != "firing" && j["status"] != "resolved")
    return ApiError{400, "status", "must be firing or resolved"};
  const auto& alerts = j["alerts"];
  if (alerts.size() > kMaxAlerts) return ApiError{400, "alerts", "has over 1000 alerts"};
  for (size_t i = 0; i < alerts.size(); ++i) {
    const std::string path = "alerts[" + std::to_string(i) + "]";
    if (!alerts[i].is_object()) return ApiError{400, path, "must be an object"};
    if (auto e = check_fields(alerts[i], kAlertFields, path + ".")) return e;
    if (auto e = check_string_map(alerts[i]["labels"], path + ".labels")) return e;
    if (alerts[i].contains("annotations"))
      if (auto e = check_string_map(alerts[i]["annotations"], path + ".annotations")) return e;
    if (alerts[i].contains("status") && alerts[i]["status"] != "firing" && alerts[i]["status"] != "resolved")
      return ApiError{400, path + ".status", "must be firing or resolved"};
    const auto& labels = alerts[i]["labels"];
    for (const char* id_label : {"faultline_experiment", "faultline_agent"})
      if (labels.contains(id_label)) {
        const auto v = labels[id_label].get<std::string>();
        if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
          return ApiError{400, path + ".labels." + id_label, "must be an id (digits)"};
      }
  }
  return std::nullopt;
}

}  // namespace faultline::cp
