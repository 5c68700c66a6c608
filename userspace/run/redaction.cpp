#include "userspace/run/redaction.h"

namespace faultline {

nlohmann::json redact_json(const Redactor& r, const nlohmann::json& j) {
  if (!r.enabled()) return j;
  if (j.is_string()) return r.text(j.get<std::string>());
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(redact_json(r, v));
    return out;
  }
  if (!j.is_object()) return j;
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : j.items()) {
    out[k] =
        Redactor::secret_name(k) && (v.is_string() || v.is_number()) ? nlohmann::json(kRedacted) : redact_json(r, v);
  }
  return out;
}

}  // namespace faultline
