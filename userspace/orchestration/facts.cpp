// The Prometheus side of the facts: instant queries over the guardrails'
// client, and a service's SLO read from its recorded series.
#include "userspace/orchestration/facts.h"

#include <cmath>

#include "userspace/guardrails/prometheus.h"

namespace faultline {
namespace {

class PrometheusInstantQuery final : public InstantQuery {
 public:
  PrometheusInstantQuery(PrometheusClient client, uint64_t timeout_ns)
      : client_(std::move(client)), timeout_ns_(timeout_ns) {}
  Result<double> value(const std::string& promql) override {
    auto s = client_.query(promql, timeout_ns_);
    if (!s) return s.error();
    return s->value;
  }
  [[nodiscard]] std::string where() const override { return client_.url(); }

 private:
  PrometheusClient client_;
  uint64_t timeout_ns_;
};

}  // namespace

Result<std::unique_ptr<InstantQuery>> prometheus_query(const std::string& url, uint64_t timeout_ns) {
  return prometheus_query(PrometheusEndpoint{url, ""}, timeout_ns);
}

Result<std::unique_ptr<InstantQuery>> prometheus_query(const PrometheusEndpoint& e, uint64_t timeout_ns) {
  auto c = PrometheusClient::create(e);
  if (!c) return c.error();
  return std::unique_ptr<InstantQuery>(std::make_unique<PrometheusInstantQuery>(std::move(*c), timeout_ns));
}

Result<SloReading> read_slo(InstantQuery& prom, const ServiceSpec& s) {
  SloReading r;
  for (auto [series, dest] : {std::pair<const std::string*, double*>{&s.slo.burn_rate_5m, &r.burn_rate_5m},
                              {&s.slo.burn_rate_1h, &r.burn_rate_1h},
                              {&s.slo.budget_remaining, &r.budget_remaining}}) {
    const std::string q = "max(" + slo_selector(s, *series) + ")";
    auto v = prom.value(q);
    if (!v) return make_error(v.error().err, q + " at " + prom.where() + ": " + v.error().message);
    if (std::isnan(*v)) return make_error(0, q + " at " + prom.where() + ": NaN (no traffic to judge)");
    *dest = *v;
  }
  return r;
}

}  // namespace faultline
