// Redaction applied to JSON: values under keys that name a secret, and every
// string through the text rules (base/redact.h).
#pragma once

#include <nlohmann/json.hpp>

#include "base/redact.h"

namespace faultline {

[[nodiscard]] nlohmann::json redact_json(const Redactor& r, const nlohmann::json& j);

}  // namespace faultline
