// A scenario file read and checked whole: its steps' experiments, its cap.
#include "userspace/orchestration/scenario.h"

#include <cmath>
#include <set>

#include "userspace/faults/experiment_guardrails.h"

namespace faultline {
namespace {

constexpr const char* kScenarioFields[] = {"kind", "name", "max_duration_s", "on_failure", "guardrails", "steps"};
constexpr const char* kScenarioStepFields[] = {"name",       "template",   "params", "cgroup",
                                               "guardrails", "experiment", "wait_s"};
constexpr const char* kScenarioWatchdogFields[] = {"prometheus_url", "slo_watchdog", "abort_burn_rate_5m",
                                                   "interval_s"};

template <size_t N>
std::optional<SpecError> scenario_known(const nlohmann::json& j, const char* const (&known)[N],
                                        const std::string& where, const std::string& what) {
  for (const auto& item : j.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || item.key() == k;
    if (ok) continue;
    std::string names;
    for (const char* k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    return SpecError{where + item.key(), "not a field of " + what + " (" + names + ")"};
  }
  return std::nullopt;
}

std::optional<int64_t> scenario_whole(const nlohmann::json& v) {
  if (v.is_number_integer())
    return v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
  return std::nullopt;
}

// "spec.delay_ms: why" (experiment_from_json's words) as "steps[2].experiment.delay_ms: why".
std::string scenario_spec_message(const std::string& message, const std::string& where) {
  return message.rfind("spec.", 0) == 0 ? where + message.substr(5) : where + " " + message;
}

// A step's planned time: the fault's duration, and a record's steady state before and after it.
int64_t scenario_planned(const nlohmann::json& spec) {
  int64_t s = scenario_whole(spec.value("duration_sec", nlohmann::json())).value_or(0);
  if (spec.contains("hypothesis"))
    s += 2 * static_cast<int64_t>((guardrail_duration_ns(spec, "steady_state").value_or(0) + 999'999'999ULL) /
                                  1'000'000'000ULL);
  return s;
}

std::optional<SpecError> scenario_watchdog(const nlohmann::json& g, ScenarioWatchdog& w) {
  if (!g.is_object()) return SpecError{"guardrails", "must be an object (prometheus_url, slo_watchdog, ...)"};
  if (auto e = scenario_known(g, kScenarioWatchdogFields, "guardrails.", "the scenario's guardrails")) return e;
  for (const char* f : {"prometheus_url", "slo_watchdog", "abort_burn_rate_5m"})
    if (!g.contains(f))
      return SpecError{std::string("guardrails.") + f, "is required (the SLO watchdog of every step)"};
  const auto& url = g["prometheus_url"];
  if (!url.is_string() ||
      (url.get<std::string>().rfind("http://", 0) != 0 && url.get<std::string>().rfind("https://", 0) != 0))
    return SpecError{"guardrails.prometheus_url", "must be an http:// or https:// URL"};
  w.prometheus_url = url.get<std::string>();
  const auto& svc = g["slo_watchdog"];
  if (!svc.is_string() || !valid_service_name(svc.get<std::string>()))
    return SpecError{"guardrails.slo_watchdog", "must be a service's name (1-63 of a-z 0-9 . _ -)"};
  w.service = svc.get<std::string>();
  const auto& limit = g["abort_burn_rate_5m"];
  if (!limit.is_number() || !std::isfinite(limit.get<double>()) || limit.get<double>() <= 0)
    return SpecError{"guardrails.abort_burn_rate_5m", "must be a number above 0 (the watchdog clamps it to 2-10)"};
  w.abort_burn_rate_5m = limit.get<double>();
  if (g.contains("interval_s")) {
    auto i = scenario_whole(g["interval_s"]);
    if (!i || *i < 1 || *i > 600) return SpecError{"guardrails.interval_s", "must be 1-600 seconds"};
    w.interval_s = *i;
  }
  return std::nullopt;
}

std::optional<SpecError> scenario_step(const nlohmann::json& j, size_t index, ScenarioStep& step) {
  const std::string where = "steps[" + std::to_string(index) + "].";
  if (!j.is_object()) return SpecError{"steps[" + std::to_string(index) + "]", "must be an object"};
  if (auto e = scenario_known(j, kScenarioStepFields, where, "a step")) return e;
  const int kinds = int(j.contains("template")) + int(j.contains("experiment")) + int(j.contains("wait_s"));
  if (kinds != 1)
    return SpecError{"steps[" + std::to_string(index) + "]",
                     "needs exactly one of template (with params and cgroup), experiment or wait_s"};
  step.name = "step-" + std::to_string(index + 1);
  if (j.contains("name")) {
    if (!j["name"].is_string() || !valid_service_name(j["name"].get<std::string>()))
      return SpecError{where + "name", "must be 1-63 of a-z 0-9 . _ -"};
    step.name = j["name"].get<std::string>();
  }
  if (!j.contains("template")) {
    for (const char* f : {"params", "cgroup", "guardrails"})
      if (j.contains(f)) return SpecError{where + f, "goes with a template step"};
  }
  if (j.contains("wait_s")) {
    auto w = scenario_whole(j["wait_s"]);
    if (!w || *w < 1 || *w > 3600) return SpecError{where + "wait_s", "must be 1-3600 seconds"};
    step.wait_s = step.planned_s = *w;
    return std::nullopt;
  }
  if (j.contains("experiment")) {
    step.spec = j["experiment"];
    if (!step.spec.is_object()) return SpecError{where + "experiment", "must be an experiment's JSON object"};
    auto e = experiment_from_json(step.spec, "");
    if (!e) return SpecError{"", scenario_spec_message(e.error().message, where + "experiment.")};
    step.experiment = std::move(*e);
    step.planned_s = scenario_planned(step.spec);
    return std::nullopt;
  }
  if (!j["template"].is_string()) return SpecError{where + "template", "must be a template's name"};
  step.tmpl = find_template(j["template"].get<std::string>());
  if (!step.tmpl)
    return SpecError{where + "template",
                     "'" + j["template"].get<std::string>() + "' is not a template: one of " + fault_names()};
  step.params = j.value("params", nlohmann::json::object());
  if (auto e = check_params(*step.tmpl, step.params)) return SpecError{where + "params." + e->field, e->message};
  if (!j.contains("cgroup") || !j["cgroup"].is_string() || j["cgroup"].get<std::string>().empty())
    return SpecError{where + "cgroup", "is required: the cgroup of the instance " + step.tmpl->name + " acts on"};
  auto r = render_template(*step.tmpl, step.params, TemplateInstance{j["cgroup"].get<std::string>()});
  if (!r) return SpecError{where + "template", r.error().message};
  step.spec = std::move(r->spec);
  if (j.contains("guardrails")) {
    const auto& g = j["guardrails"];
    if (!g.is_object()) return SpecError{where + "guardrails", "must be an object of guardrail fields"};
    for (const auto& item : g.items()) {
      if (!is_guardrail_field(item.key()))
        return SpecError{where + "guardrails." + item.key(),
                         "not a guardrail field (health_url, query, hypothesis, steady_state, ...)"};
      step.spec[item.key()] = item.value();
    }
    auto e = experiment_from_json(step.spec, "");
    if (!e) return SpecError{"", scenario_spec_message(e.error().message, where + "guardrails.")};
    step.experiment = std::move(*e);
  } else {
    step.experiment = std::move(r->experiment);
  }
  step.planned_s = scenario_planned(step.spec);
  return std::nullopt;
}

}  // namespace

int64_t Scenario::planned_s() const {
  int64_t s = 0;
  for (const auto& step : steps) s += step.planned_s;
  return s;
}

std::variant<Scenario, SpecError> read_scenario(const nlohmann::json& doc) {
  if (!doc.is_object()) return SpecError{"", "a scenario is a JSON object with \"kind\": \"Scenario\""};
  if (auto e = scenario_known(doc, kScenarioFields, "", "a scenario")) return *e;
  if (!doc.contains("kind") || doc["kind"] != "Scenario") return SpecError{"kind", "must be \"Scenario\""};
  Scenario s;
  if (!doc.contains("name") || !doc["name"].is_string() || !valid_service_name(doc["name"].get<std::string>()))
    return SpecError{"name", "is required: 1-63 of a-z 0-9 . _ -"};
  s.name = doc["name"].get<std::string>();
  auto cap = doc.contains("max_duration_s") ? scenario_whole(doc["max_duration_s"]) : std::nullopt;
  if (!cap || *cap < 1 || *cap > kMaxScenarioDurationS)
    return SpecError{"max_duration_s", "is required: the cap of the whole scenario, 1-86400 seconds"};
  s.max_duration_s = *cap;
  if (doc.contains("on_failure")) {
    if (doc["on_failure"] != "abort" && doc["on_failure"] != "continue")
      return SpecError{"on_failure", "must be abort (the default) or continue"};
    s.continue_on_failure = doc["on_failure"] == "continue";
  }
  if (doc.contains("guardrails")) {
    ScenarioWatchdog w;
    if (auto e = scenario_watchdog(doc["guardrails"], w)) return *e;
    s.watchdog = std::move(w);
  }
  if (!doc.contains("steps") || !doc["steps"].is_array() || doc["steps"].empty())
    return SpecError{"steps", "is required: a list of 1-100 steps"};
  if (doc["steps"].size() > kMaxScenarioSteps) return SpecError{"steps", "at most 100 steps"};
  std::set<std::string> names;
  for (size_t i = 0; i < doc["steps"].size(); ++i) {
    ScenarioStep step;
    if (auto e = scenario_step(doc["steps"][i], i, step)) return *e;
    if (!names.insert(step.name).second)
      return SpecError{"steps[" + std::to_string(i) + "].name", "'" + step.name + "' names an earlier step too"};
    s.steps.push_back(std::move(step));
  }
  bool any_fault = false;
  for (const auto& step : s.steps) any_fault = any_fault || !step.is_wait();
  if (!any_fault) return SpecError{"steps", "has no experiment or template: nothing to run"};
  if (s.planned_s() > s.max_duration_s)
    return SpecError{"max_duration_s", "the steps take " + std::to_string(s.planned_s()) + " s, over the cap of " +
                                           std::to_string(s.max_duration_s) + " s"};
  return s;
}

}  // namespace faultline
