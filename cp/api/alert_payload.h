// The inbound alert's body (POST /webhooks/alert): Alertmanager's webhook
// payload, version 4. Every member it sends is known and typed; labels and
// annotations are maps of strings; the id labels faultcp matches on
// (faultline_experiment, faultline_agent) are digits.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "cp/api/api_error.h"

namespace faultline::cp {

// None if `payload` (a JSON object) has Alertmanager's shape; else the first
// member that does not, named ("alerts[2].labels.severity").
[[nodiscard]] std::optional<ApiError> check_alert_payload(const nlohmann::json& payload);

}  // namespace faultline::cp
