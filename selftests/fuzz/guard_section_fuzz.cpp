// libFuzzer target: the guard's policy section arrives from files and from the
// control plane, so any bytes at all, as YAML/JSON text and as a JSON value.
// Every refusal names where and why; what parses decides without a fault.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "userspace/policy/guard_section.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  faultline::GuardSectionParse p = faultline::parse_guard_text(in);
  for (const auto& e : p.errors) {
    if (e.reason.empty() || e.path.empty() || e.mark.line < 1 || e.mark.column < 1) __builtin_trap();
  }
  if (p.ok()) {
    faultline::RequestFacts f{"POST", "a.example.com", 443, "/v1/messages", true, "m", 10, false};
    (void)faultline::decide(p.policy, f);
    f.llm_facts_unparseable = true;
    f.llm_model.reset();
    (void)faultline::decide(p.policy, f);
  }
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_discarded()) {
    auto g = faultline::parse_guard_section(j);
    if (!g.ok() && g.error().message.empty()) __builtin_trap();
  }
  return 0;
}
