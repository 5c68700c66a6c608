#include "userspace/guardrails/guardrail.h"

#include "base/clock.h"

namespace faultline {

void merge_reading(GuardrailReading& a, const GuardrailReading& b) {
  for (const auto& [k, v] : b.values) a.values[k] = v;
  if (!b.healthy) {
    a.healthy = false;
    a.problem += (a.problem.empty() ? "" : "; ") + b.problem;
  }
}

GuardrailReading read_all(const Guardrails& guardrails) {
  GuardrailReading all;
  for (const auto& g : guardrails) merge_reading(all, g->read());
  all.t_ns = boottime_ns();
  return all;
}

}  // namespace faultline
