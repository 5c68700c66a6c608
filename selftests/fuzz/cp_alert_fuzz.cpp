// libFuzzer target: what faultcp reads from bytes it does not trust on the
// webhook paths — an inbound alert's body (parse_body, then Alertmanager's
// shape) and a webhook URL (parse_webhook_url). Every outcome is a value or
// an error naming a field; an accepted alert has string labels, an accepted
// URL a host, a port and a path.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cp/api/alert_payload.h"
#include "cp/api/api_error.h"
#include "cp/webhooks/webhook_post.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace faultline::cp;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (auto url = parse_webhook_url(bytes)) {
    if (url->host.empty() || url->port == 0 || url->path.empty() || url->path[0] != '/') std::abort();
  } else if (!url.error().bad_input) {
    std::abort();
  }
  auto parsed = parse_body(bytes);
  if (auto* err = std::get_if<ApiError>(&parsed)) {
    if (err->field.empty() || err->status != 400) std::abort();
    return 0;
  }
  const auto& j = std::get<nlohmann::json>(parsed);
  if (auto e = check_alert_payload(j)) {
    if (e->field.empty() || e->status != 400) std::abort();
    return 0;
  }
  if (!j.contains("alerts") || !j["alerts"].is_array()) std::abort();
  for (const auto& a : j["alerts"])
    for (const auto& [k, v] : a["labels"].items())
      if (!v.is_string()) std::abort();
  return 0;
}
