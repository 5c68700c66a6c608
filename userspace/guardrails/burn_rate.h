// The SLO burn-rate guardrail: the multiwindow pattern of the Google SRE
// workbook ("Alerting on SLOs"). The error budget burns at some rate over a
// fast window (minutes) and a slow one (an hour); the fault is ended only when
// both burn faster than the limit: the fast window says it is happening now,
// the slow one that it is more than a blip.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/guardrails/prometheus_guardrail.h"

namespace faultline {

struct BurnRateConfig {
  PrometheusPolling polling;
  // --slo-burn-rate: one expression with "{window}" in it, queried once per
  // window; or two expressions (fast_expression and slow_expression), queried as given.
  std::string fast_expression;
  std::string slow_expression;                         // empty: fast_expression has {window}
  std::string fast_window = "5m", slow_window = "1h";  // --burn-windows FAST,SLOW
  // --slo-target P (percent): the expressions are error ratios, and the burn
  // rate is ratio / (1 - P/100). Without it they are burn rates already.
  std::optional<double> slo_target;
  double abort_above = 0;  // both burn rates above this: a breach

  [[nodiscard]] std::string fast_query() const;
  [[nodiscard]] std::string slow_query() const;
};

// "{window}" replaced by window, everywhere in expr.
[[nodiscard]] std::string substitute_window(const std::string& expr, const std::string& window);
// A Prometheus duration ("30s", "5m", "1h30m", "1d") in seconds; an error if it is not one.
[[nodiscard]] Result<double> parse_prometheus_duration(const std::string& s);

class BurnRateGuardrail final : public Guardrail {
 public:
  // Bad input: windows that are not Prometheus durations or not fast < slow, a
  // target outside (0, 100), an expression without {window} given once.
  [[nodiscard]] static Result<BurnRateGuardrail> create(const BurnRateConfig& cfg);

  [[nodiscard]] std::string name() const override { return "slo burn rate"; }
  [[nodiscard]] uint64_t interval_ns() const override { return cfg_.polling.interval_ns; }
  // Both queries once before the fault (as the Prometheus guardrail does).
  [[nodiscard]] Status arm() override;
  // Both windows. Both burn rates above the limit: a breach. Either query
  // failing is a query error, tolerated --query-errors times in a row. The
  // reading's values: "burn_rate_fast", "burn_rate_slow".
  [[nodiscard]] GuardrailReading read() override;
  [[nodiscard]] nlohmann::json describe() const override;
  [[nodiscard]] std::string summary() const override;
  [[nodiscard]] nlohmann::json event(const GuardrailReading& r) const override;

 private:
  BurnRateGuardrail(BurnRateConfig cfg, PrometheusClient client)
      : cfg_(std::move(cfg)), client_(std::move(client)), errors_(cfg_.polling.query_errors) {}
  // The burn rate over one window.
  [[nodiscard]] Result<double> burn(const std::string& query, const std::string& window) const;
  [[nodiscard]] std::string window_name(bool fast) const;

  BurnRateConfig cfg_;
  PrometheusClient client_;
  QueryErrorRun errors_;
  std::optional<double> fast_, slow_;  // the last burn rates, for event()
};

}  // namespace faultline
