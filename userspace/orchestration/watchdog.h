// The SLO watchdog (issue 29 §5) as a Guardrail of the one run loop: the
// service's slo:burn_rate5m read every interval (10 s) and compared with
// abort_burn_rate_5m (clamped 2-10). A Prometheus that is silent (no answer,
// no series of the service) aborts at once: a watchdog that cannot see does
// not hold. Armed only after its preflight says "ready".
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/result.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/orchestration/facts.h"
#include "userspace/orchestration/preflight.h"
#include "userspace/orchestration/service.h"

namespace faultline {

struct SloWatchdogConfig {
  ServiceSpec service;
  double abort_burn_rate_5m = 0;  // clamped to [2, 10]
  uint64_t interval_ns = 10'000'000'000ULL;
  int64_t steady_state_s = 300;  // the preflight's look back
};

class SloWatchdog final : public Guardrail {
 public:
  SloWatchdog(std::shared_ptr<InstantQuery> prom, SloWatchdogConfig cfg);

  [[nodiscard]] std::string name() const override { return "slo watchdog"; }
  [[nodiscard]] uint64_t interval_ns() const override { return cfg_.interval_ns; }
  // The preflight (watchdog_preflight()): anything but "ready" is an error
  // naming its refusals, or saying the comparison is untested.
  [[nodiscard]] Status arm() override;
  // burn_rate_5m above the limit, or no answer: unhealthy. The reading's
  // value: "burn_rate_5m" when Prometheus answered.
  [[nodiscard]] GuardrailReading read() override;
  [[nodiscard]] nlohmann::json describe() const override;
  // "slo:burn_rate5m{service=\"api\"} at URL every 10s, unhealthy above 4 or when Prometheus is silent".
  [[nodiscard]] std::string summary() const override;
  [[nodiscard]] nlohmann::json event(const GuardrailReading& r) const override;

  // What the watchdog records of the run: {"outcome":"aborted",
  // "burn_rate_at_abort":X} (X null when Prometheus fell silent) once a
  // reading breached, else {"outcome":"completed"}.
  [[nodiscard]] nlohmann::json outcome_json() const;
  // The same, for a record's verdict.json.
  [[nodiscard]] nlohmann::json outcome() const override { return outcome_json(); }
  // Readings after the fault (a record's after window) no longer abort it.
  void fault_ended() override { fault_over_ = true; }
  [[nodiscard]] const std::optional<PreflightResult>& preflight() const { return preflight_; }
  [[nodiscard]] double limit() const { return limit_; }

 private:
  std::shared_ptr<InstantQuery> prom_;
  SloWatchdogConfig cfg_;
  double limit_;
  std::optional<PreflightResult> preflight_;
  bool aborted_ = false, fault_over_ = false;
  std::optional<double> at_abort_, last_;
};

}  // namespace faultline
