#include "userspace/guardrails/guardrail.h"

#include <nlohmann/json.hpp>

#include "base/clock.h"

namespace faultline {

void merge_reading(GuardrailReading& a, const GuardrailReading& b) {
  for (const auto& [k, v] : b.values) a.values[k] = v;
  if (!b.healthy) {
    a.healthy = false;
    a.problem += (a.problem.empty() ? "" : "; ") + b.problem;
  }
}

std::string Guardrail::summary() const { return describe().dump(); }

nlohmann::json Guardrail::outcome() const { return nullptr; }

GuardrailReading read_named(Guardrail& g) {
  GuardrailReading r = g.read();
  if (!r.healthy) r.problem = g.name() + ": " + r.problem;
  return r;
}

GuardrailReading read_all(const Guardrails& guardrails) {
  GuardrailReading all;
  for (const auto& g : guardrails) merge_reading(all, read_named(*g));
  all.t_ns = boottime_ns();
  return all;
}

nlohmann::json describe_all(const Guardrails& guardrails) {
  nlohmann::json j = nlohmann::json::object();
  nlohmann::json lines = nlohmann::json::array();
  for (const auto& g : guardrails) {
    j.update(g->describe());
    lines.push_back(g->summary());
  }
  if (!guardrails.empty()) j["summary"] = lines;
  return j;
}

}  // namespace faultline
