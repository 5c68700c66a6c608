// libFuzzer target: a service's body (POST /v1/services) is any bytes a
// client sends. What parses as JSON is read; a refusal names a field or says
// the body is not an object; a spec that reads writes back to JSON that reads
// to the same spec, and its window judges any time without a fault.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "userspace/orchestration/service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return 0;
  auto r = faultline::read_service_spec(j);
  if (auto* e = std::get_if<faultline::SpecError>(&r)) {
    if (e->message.empty() || (e->field.empty() && j.is_object())) __builtin_trap();
    return 0;
  }
  const auto& s = std::get<faultline::ServiceSpec>(r);
  const nlohmann::json out = faultline::service_spec_json(s);
  auto again = faultline::read_service_spec(out);
  if (!std::holds_alternative<faultline::ServiceSpec>(again)) __builtin_trap();
  if (faultline::service_spec_json(std::get<faultline::ServiceSpec>(again)) != out) __builtin_trap();
  if (!faultline::valid_service_name(s.name)) __builtin_trap();
  (void)s.window.contains(static_cast<int64_t>(size) * 86399, static_cast<int64_t>(size) * 86399 + 60);
  (void)s.window.describe();
  return 0;
}
