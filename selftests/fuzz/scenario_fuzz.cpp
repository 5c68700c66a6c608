// libFuzzer target: a scenario file, and a template's parameters, are any
// bytes a person or a model writes. What parses as JSON is read: a refusal
// says why; a scenario that reads fits its cap and has an experiment in every
// step that is not a wait; parameters that check render for any instance or
// are refused as bad input.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "userspace/orchestration/catalogue.h"
#include "userspace/orchestration/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return 0;
  auto r = faultline::read_scenario(j);
  if (auto* e = std::get_if<faultline::SpecError>(&r)) {
    if (e->message.empty()) __builtin_trap();
  } else {
    const auto& s = std::get<faultline::Scenario>(r);
    if (s.steps.empty() || s.planned_s() > s.max_duration_s) __builtin_trap();
    for (const auto& step : s.steps)
      if (step.is_wait() ? step.wait_s < 1 : !step.spec.is_object()) __builtin_trap();
  }
  for (const auto& t : faultline::catalogue()) {
    if (faultline::check_params(t, j)) continue;
    auto rendered = faultline::render_template(t, j, faultline::TemplateInstance{"/fuzz"});
    if (!rendered && !rendered.error().bad_input) __builtin_trap();
    (void)faultline::render_chaos_mesh(t, j, faultline::ChaosMeshTarget{"svc", "run1"});
  }
  return 0;
}
