// The Prometheus guardrail: a PromQL instant query read every interval, a
// breach when its value passes a limit, and failed queries tolerated only a few
// times in a row (a Prometheus that cannot answer is not a healthy system).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/guardrails/prometheus.h"

namespace faultline {

// What every Prometheus guardrail shares: where it asks, how often, and how
// many failed queries in a row it tolerates.
struct PrometheusPolling {
  PrometheusEndpoint endpoint;
  uint64_t interval_ns = 5'000'000'000ULL;  // --prometheus-interval, or --interval
  int query_errors = 3;                     // tolerated in a row; one more is a breach
  // A query not answered within the interval (at most 5 s) failed: the run
  // loop waits for it, so it may not hold the other guardrails back for long.
  [[nodiscard]] uint64_t timeout_ns() const;
};

// Failed queries in a row: up to `tolerated` read as healthy, one more as a breach.
class QueryErrorRun {
 public:
  explicit QueryErrorRun(int tolerated) : tolerated_(tolerated) {}
  // True when this failure is one too many.
  [[nodiscard]] bool fail(const std::string& why);
  void succeed() { in_row_ = 0; }
  [[nodiscard]] int in_row() const { return in_row_; }
  [[nodiscard]] uint64_t total() const { return total_; }
  [[nodiscard]] const std::string& last() const { return last_; }
  // "4 query errors in a row (--query-errors tolerates 3), the last: ..."
  [[nodiscard]] std::string breach_text() const;

 private:
  int tolerated_;
  int in_row_ = 0;
  uint64_t total_ = 0;
  std::string last_;
};

struct PrometheusGuardrailConfig {
  PrometheusPolling polling;
  std::string query;                  // --query
  std::optional<double> abort_above;  // breach when the value is above
  std::optional<double> abort_below;  // breach when the value is below
};

class PrometheusGuardrail final : public Guardrail {
 public:
  // Bad input: a URL that cannot be used, no limit, an empty query.
  [[nodiscard]] static Result<PrometheusGuardrail> create(const PrometheusGuardrailConfig& cfg);

  [[nodiscard]] std::string name() const override { return "prometheus"; }
  [[nodiscard]] uint64_t interval_ns() const override { return cfg_.polling.interval_ns; }
  // One query before anything is injected: a Prometheus that cannot answer it
  // now (down, a PromQL error, no such series) would only be found out mid-fault.
  [[nodiscard]] Status arm() override;
  // One query. Its value past a limit is a breach; a failed query (an error,
  // no answer in time, an empty or multi-series result, NaN) is tolerated
  // --query-errors times in a row, and one more is a breach that says the query
  // failed. The reading's value: "prometheus_value" when the query answered.
  [[nodiscard]] GuardrailReading read() override;
  [[nodiscard]] nlohmann::json describe() const override;
  [[nodiscard]] std::string summary() const override;
  [[nodiscard]] nlohmann::json event(const GuardrailReading& r) const override;

 private:
  PrometheusGuardrail(PrometheusGuardrailConfig cfg, PrometheusClient client)
      : cfg_(std::move(cfg)), client_(std::move(client)), errors_(cfg_.polling.query_errors) {}
  // The value, or why it is not one to judge.
  [[nodiscard]] Result<PromSample> ask() const;

  PrometheusGuardrailConfig cfg_;
  PrometheusClient client_;
  QueryErrorRun errors_;
  std::optional<double> value_;  // the last answer, for event()
};

}  // namespace faultline
