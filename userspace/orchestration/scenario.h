// A scenario: experiments run one after another under the same brakes. Each
// step is a typed experiment (its JSON, as faultcp takes one), a template of
// the catalogue with its parameters and instance, or a wait. The whole file is
// read and checked before anything runs: every step's experiment is read back
// by experiment_from_json(), the planned time must fit the scenario's cap.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "userspace/ops/experiment.h"
#include "userspace/orchestration/catalogue.h"
#include "userspace/orchestration/service.h"

namespace faultline {

struct ScenarioStep {
  std::string name;  // "step-N" unless named
  // A template step: its name, version, SHA-256 and parameters (the record keeps them).
  const CatalogueTemplate* tmpl = nullptr;
  nlohmann::json params;
  // The experiment's JSON and its typed form; absent for a wait.
  nlohmann::json spec;
  std::optional<Experiment> experiment;
  int64_t wait_s = 0;     // a wait step: how long
  int64_t planned_s = 0;  // the fault's duration (with a record's steady state before and after), or the wait

  [[nodiscard]] bool is_wait() const { return !experiment.has_value(); }
};

// The SLO watchdog every fault step runs under (faultctl run --slo-watchdog).
struct ScenarioWatchdog {
  std::string prometheus_url;
  std::string service;
  double abort_burn_rate_5m = 0;  // clamped to 2-10 by the watchdog
  int64_t interval_s = 10;
};

struct Scenario {
  std::string name;
  int64_t max_duration_s = 0;
  bool continue_on_failure = false;  // on_failure: continue (a guardrail's abort still ends the scenario)
  std::optional<ScenarioWatchdog> watchdog;
  std::vector<ScenarioStep> steps;

  [[nodiscard]] int64_t planned_s() const;
};

inline constexpr int64_t kMaxScenarioDurationS = 86400;
inline constexpr size_t kMaxScenarioSteps = 100;

// Reads and checks a scenario document ("kind": "Scenario"). An error names
// the field ("steps[1].params.latency_ms: 900 is out of range 20-500").
[[nodiscard]] std::variant<Scenario, SpecError> read_scenario(const nlohmann::json& doc);

}  // namespace faultline
