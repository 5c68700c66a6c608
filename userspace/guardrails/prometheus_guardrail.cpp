// The PromQL threshold guardrail.
#include "userspace/guardrails/prometheus_guardrail.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/units.h"

namespace faultline {

uint64_t PrometheusPolling::timeout_ns() const { return std::min<uint64_t>(interval_ns, 5'000'000'000ULL); }

bool QueryErrorRun::fail(const std::string& why) {
  ++in_row_;
  ++total_;
  last_ = why;
  return in_row_ > tolerated_;
}

std::string QueryErrorRun::breach_text() const {
  return "the query failed " + std::to_string(in_row_) + " times in a row (--query-errors tolerates " +
         std::to_string(tolerated_) + "), the last: " + last_;
}

Result<PrometheusGuardrail> PrometheusGuardrail::create(const PrometheusGuardrailConfig& cfg) {
  if (cfg.query.find_first_not_of(" \t\n") == std::string::npos) return input_error(EINVAL, "--query: empty PromQL");
  if (!cfg.abort_above && !cfg.abort_below)
    return input_error(EINVAL, "--query needs --abort-above X or --abort-below X (or both)");
  auto client = PrometheusClient::create(cfg.polling.endpoint);
  if (!client) return client.error();
  return PrometheusGuardrail(cfg, std::move(*client));
}

Result<PromSample> PrometheusGuardrail::ask() const {
  auto s = client_.query(cfg_.query, cfg_.polling.timeout_ns());
  if (!s) return s.error();
  // NaN (0/0: a ratio with no traffic) can be neither above nor below a limit:
  // a guardrail that reads it as healthy would be blind, so it is a query error.
  if (std::isnan(s->value)) return make_error(0, "the query answered NaN");
  return s;
}

Status PrometheusGuardrail::arm() {
  auto s = ask();
  if (!s)
    return make_error(s.error().err, "prometheus: the query " + cfg_.query +
                                         " failed before the fault, so nothing was injected: " + s.error().message);
  return {};
}

GuardrailReading PrometheusGuardrail::read() {
  GuardrailReading r;
  r.t_ns = boottime_ns();
  value_.reset();
  auto s = ask();
  if (!s) {
    if (errors_.fail(s.error().describe())) {
      r.healthy = false;
      r.problem = errors_.breach_text();
    }
    return r;
  }
  errors_.succeed();
  value_ = s->value;
  r.values["prometheus_value"] = s->value;
  const std::string shown = cfg_.query.size() > 80 ? cfg_.query.substr(0, 77) + "..." : cfg_.query;
  if (cfg_.abort_above && s->value > *cfg_.abort_above) {
    r.healthy = false;
    r.problem = shown + " = " + format_value(s->value) + ", above " + format_value(*cfg_.abort_above);
  } else if (cfg_.abort_below && s->value < *cfg_.abort_below) {
    r.healthy = false;
    r.problem = shown + " = " + format_value(s->value) + ", below " + format_value(*cfg_.abort_below);
  }
  return r;
}

nlohmann::json PrometheusGuardrail::describe() const {
  nlohmann::json p{{"url", client_.url()},
                   {"query", cfg_.query},
                   {"interval", format_duration(cfg_.polling.interval_ns)},
                   {"query_errors", cfg_.polling.query_errors}};
  if (cfg_.abort_above) p["abort_above"] = *cfg_.abort_above;
  if (cfg_.abort_below) p["abort_below"] = *cfg_.abort_below;
  if (!cfg_.polling.endpoint.ca_file.empty()) p["ca"] = cfg_.polling.endpoint.ca_file;
  return {{"prometheus", p}};
}

std::string PrometheusGuardrail::summary() const {
  std::string limit;
  if (cfg_.abort_above) limit = "above " + format_value(*cfg_.abort_above);
  if (cfg_.abort_below)
    limit += (limit.empty() ? "" : " or ") + std::string("below ") + format_value(*cfg_.abort_below);
  return "Prometheus " + client_.url() + ": " + cfg_.query + " every " + format_duration(cfg_.polling.interval_ns) +
         ", abort when " + limit + " or after " + std::to_string(cfg_.polling.query_errors + 1) +
         " failed queries in a row";
}

nlohmann::json PrometheusGuardrail::event(const GuardrailReading& r) const {
  nlohmann::json j{{"event", "prometheus"}, {"healthy", r.healthy}};
  if (value_) {
    j["value"] = std::isfinite(*value_) ? nlohmann::json(*value_) : nlohmann::json(format_value(*value_));
  } else {
    j["query_error"] = errors_.last();
    j["errors_in_row"] = errors_.in_row();
  }
  if (!r.problem.empty()) j["problem"] = r.problem;
  return j;
}

}  // namespace faultline
