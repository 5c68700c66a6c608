// The facts the orchestration decides on, read through interfaces so the
// validator and the preflight read them themselves (never a proposal's claims)
// from whatever holds them: faultcp's store, Prometheus' HTTP API.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/guardrails/prometheus.h"
#include "userspace/orchestration/service.h"

namespace faultline {

// A service and what is known of it now.
struct ServiceFacts {
  ServiceSpec spec;
  int64_t replicas_ready = 0;
  // Where it was seen sending traffic ("host:port"); empty until something reports flows.
  std::vector<std::string> dependencies;
};

// A service's SLO as its recorded series read now.
struct SloReading {
  double burn_rate_5m = 0;
  double burn_rate_1h = 0;
  double budget_remaining = 0;  // of the 30-day error budget: 1 untouched, 0 spent
};

class FactSource {
 public:
  virtual ~FactSource() = default;
  // The registered service of that name; none when there is none.
  [[nodiscard]] virtual Result<std::optional<ServiceFacts>> service(const std::string& name) = 0;
  [[nodiscard]] virtual Result<SloReading> slo(const ServiceSpec& service) = 0;
  // A kill switch that covers the service is engaged (the workspace's, or an
  // instance's agent's).
  [[nodiscard]] virtual Result<bool> kill_switch_engaged(const ServiceFacts& service) = 0;
  // Experiments not yet ended on the service's instances.
  [[nodiscard]] virtual Result<int64_t> experiments_in_flight(const ServiceFacts& service) = 0;
};

// Instant queries that answer one number (Prometheus' HTTP API).
class InstantQuery {
 public:
  virtual ~InstantQuery() = default;
  // The query's one value; an error when it answers no series, several, or
  // not at all.
  [[nodiscard]] virtual Result<double> value(const std::string& promql) = 0;
  // Where it asks, for messages.
  [[nodiscard]] virtual std::string where() const = 0;
};

// Prometheus at `url` (its base URL), each query answered within timeout_ns.
// Bad input: a URL that cannot be used.
[[nodiscard]] Result<std::unique_ptr<InstantQuery>> prometheus_query(const std::string& url, uint64_t timeout_ns);
// The same with the CA an https URL is checked against (--prometheus-ca).
[[nodiscard]] Result<std::unique_ptr<InstantQuery>> prometheus_query(const PrometheusEndpoint& e, uint64_t timeout_ns);

// The three SLO series of a service, each the max over its matching series (a
// series per instance or per route is allowed). An error names the series
// that did not answer.
[[nodiscard]] Result<SloReading> read_slo(InstantQuery& prom, const ServiceSpec& service);

}  // namespace faultline
