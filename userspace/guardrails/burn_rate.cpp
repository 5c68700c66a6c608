// Two instant queries per reading, one per window, turned into burn rates.
#include "userspace/guardrails/burn_rate.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "base/clock.h"
#include "base/units.h"

namespace faultline {
namespace {

constexpr const char* kWindow = "{window}";

}  // namespace

std::string substitute_window(const std::string& expr, const std::string& window) {
  std::string out;
  size_t from = 0;
  for (size_t at; (at = expr.find(kWindow, from)) != std::string::npos; from = at + std::strlen(kWindow))
    out += expr.substr(from, at - from) + window;
  return out + expr.substr(from);
}

Result<double> parse_prometheus_duration(const std::string& s) {
  // Units from the largest down, each at most once, as Prometheus writes them.
  static const std::pair<const char*, double> kUnits[] = {
      {"y", 365 * 86400.0}, {"w", 7 * 86400.0}, {"d", 86400.0}, {"h", 3600.0}, {"m", 60.0}, {"s", 1.0}, {"ms", 0.001}};
  if (s.empty()) return make_error(EINVAL, "an empty duration");
  double total = 0;
  size_t i = 0, next_unit = 0;
  while (i < s.size()) {
    size_t digits = i;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
    if (digits == i || digits - i > 9)
      return make_error(EINVAL, "'" + s + "' is not a Prometheus duration (5m, 1h, 1h30m)");
    double n = std::stod(s.substr(i, digits - i));
    size_t u = next_unit;
    // "ms" before "m": the longest unit that matches here.
    std::optional<size_t> found;
    for (; u < std::size(kUnits); ++u) {
      std::string_view unit = kUnits[u].first;
      if (s.compare(digits, unit.size(), unit) == 0 && !(unit == "m" && s.compare(digits, 2, "ms") == 0)) {
        found = u;
        break;
      }
    }
    if (!found) return make_error(EINVAL, "'" + s + "' is not a Prometheus duration (5m, 1h, 1h30m)");
    total += n * kUnits[*found].second;
    i = digits + std::strlen(kUnits[*found].first);
    next_unit = *found + 1;
  }
  if (total <= 0) return make_error(EINVAL, "'" + s + "' is not a positive duration");
  return total;
}

std::string BurnRateConfig::fast_query() const {
  return slow_expression.empty() ? substitute_window(fast_expression, fast_window) : fast_expression;
}

std::string BurnRateConfig::slow_query() const {
  return slow_expression.empty() ? substitute_window(fast_expression, slow_window) : slow_expression;
}

Result<BurnRateGuardrail> BurnRateGuardrail::create(const BurnRateConfig& cfg) {
  auto blank = [](const std::string& e) { return e.find_first_not_of(" \t\n") == std::string::npos; };
  if (blank(cfg.fast_expression) || (!cfg.slow_expression.empty() && blank(cfg.slow_expression)))
    return input_error(EINVAL, "--slo-burn-rate: empty PromQL");
  if (cfg.slow_expression.empty()) {
    if (cfg.fast_expression.find(kWindow) == std::string::npos)
      return input_error(EINVAL, "--slo-burn-rate '" + cfg.fast_expression +
                                     "' has no {window} to put the windows of --burn-windows in; write one "
                                     "(job:slo_errors_per_request:ratio_rate{window}) or give --slo-burn-rate twice, "
                                     "the fast window's query and then the slow one's");
    auto fast = parse_prometheus_duration(cfg.fast_window);
    if (!fast) return input_error(EINVAL, "--burn-windows: " + fast.error().message);
    auto slow = parse_prometheus_duration(cfg.slow_window);
    if (!slow) return input_error(EINVAL, "--burn-windows: " + slow.error().message);
    if (!(*fast < *slow))
      return input_error(EINVAL, "--burn-windows " + cfg.fast_window + "," + cfg.slow_window +
                                     ": the fast window comes first and must be shorter than the slow one");
  }
  if (cfg.slo_target && !(*cfg.slo_target > 0 && *cfg.slo_target < 100))
    return input_error(EINVAL, "--slo-target must be a percentage above 0 and below 100 (99.9)");
  if (!(cfg.abort_above > 0)) return input_error(EINVAL, "--slo-burn-rate needs --abort-above N, a burn rate above 0");
  auto client = PrometheusClient::create(cfg.polling.endpoint);
  if (!client) return client.error();
  return BurnRateGuardrail(cfg, std::move(*client));
}

std::string BurnRateGuardrail::window_name(bool fast) const {
  if (cfg_.slow_expression.empty()) return fast ? cfg_.fast_window : cfg_.slow_window;
  return fast ? "fast" : "slow";
}

Result<double> BurnRateGuardrail::burn(const std::string& query, const std::string& window) const {
  auto s = client_.query(query, cfg_.polling.timeout_ns());
  if (!s) return make_error(s.error().err, "the " + window + " window: " + s.error().message);
  // NaN is a ratio over no traffic: nothing to judge, so a query error (not a pass).
  if (std::isnan(s->value)) return make_error(0, "the " + window + " window: the query answered NaN");
  if (!cfg_.slo_target) return s->value;
  return s->value / (1.0 - *cfg_.slo_target / 100.0);
}

Status BurnRateGuardrail::arm() {
  for (bool fast : {true, false}) {
    auto b = burn(fast ? cfg_.fast_query() : cfg_.slow_query(), window_name(fast));
    if (!b)
      return make_error(b.error().err, "slo burn rate: the query failed before the fault, so nothing was injected: " +
                                           b.error().message);
  }
  return {};
}

GuardrailReading BurnRateGuardrail::read() {
  GuardrailReading r;
  r.t_ns = boottime_ns();
  fast_.reset();
  slow_.reset();
  auto fast = burn(cfg_.fast_query(), window_name(true));
  Result<double> slow = fast ? burn(cfg_.slow_query(), window_name(false)) : Result<double>(fast.error());
  if (!fast || !slow) {
    if (errors_.fail((fast ? slow : fast).error().describe())) {
      r.healthy = false;
      r.problem = errors_.breach_text();
    }
    return r;
  }
  errors_.succeed();
  fast_ = *fast;
  slow_ = *slow;
  r.values["burn_rate_fast"] = *fast;
  r.values["burn_rate_slow"] = *slow;
  if (*fast > cfg_.abort_above && *slow > cfg_.abort_above) {
    r.healthy = false;
    r.problem = "the error budget burns " + format_value(*fast) + "x in the " + window_name(true) + " window and " +
                format_value(*slow) + "x in the " + window_name(false) + " window, both above " +
                format_value(cfg_.abort_above) + "x";
  }
  return r;
}

nlohmann::json BurnRateGuardrail::describe() const {
  nlohmann::json b{{"url", client_.url()},
                   {"fast_query", cfg_.fast_query()},
                   {"slow_query", cfg_.slow_query()},
                   {"abort_above", cfg_.abort_above},
                   {"interval", format_duration(cfg_.polling.interval_ns)},
                   {"query_errors", cfg_.polling.query_errors}};
  if (cfg_.slow_expression.empty()) b["windows"] = {cfg_.fast_window, cfg_.slow_window};
  b["slo_target"] = cfg_.slo_target ? nlohmann::json(*cfg_.slo_target) : nlohmann::json(nullptr);
  if (!cfg_.polling.endpoint.ca_file.empty()) b["ca"] = cfg_.polling.endpoint.ca_file;
  return {{"slo_burn_rate", b}};
}

std::string BurnRateGuardrail::summary() const {
  std::string what =
      cfg_.slo_target ? "the error ratio against a " + format_value(*cfg_.slo_target) + "% target" : "the burn rate";
  return "SLO burn rate from Prometheus " + client_.url() + ": " + what + " in the " + window_name(true) + " and " +
         window_name(false) + " windows every " + format_duration(cfg_.polling.interval_ns) +
         ", abort when both burn above " + format_value(cfg_.abort_above) + "x or after " +
         std::to_string(cfg_.polling.query_errors + 1) + " failed queries in a row";
}

nlohmann::json BurnRateGuardrail::event(const GuardrailReading& r) const {
  nlohmann::json j{{"event", "slo_burn_rate"}, {"healthy", r.healthy}};
  if (fast_ && slow_) {
    auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(format_value(v)); };
    j["burn_rate_fast"] = num(*fast_);
    j["burn_rate_slow"] = num(*slow_);
  } else {
    j["query_error"] = errors_.last();
    j["errors_in_row"] = errors_.in_row();
  }
  if (!r.problem.empty()) j["problem"] = r.problem;
  return j;
}

}  // namespace faultline
