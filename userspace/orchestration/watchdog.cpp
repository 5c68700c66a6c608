// The SLO watchdog's reading: one instant query per interval, silence is a breach.
#include "userspace/orchestration/watchdog.h"

#include <cmath>
#include <cstdio>

namespace faultline {
namespace {

// A burn rate as people read it: 12.5, not 12.500000000000002.
std::string rate_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

SloWatchdog::SloWatchdog(std::shared_ptr<InstantQuery> prom, SloWatchdogConfig cfg)
    : prom_(std::move(prom)), cfg_(std::move(cfg)), limit_(clamp_abort_burn_rate(cfg_.abort_burn_rate_5m)) {}

Status SloWatchdog::arm() {
  preflight_ = watchdog_preflight(*prom_, cfg_.service, cfg_.abort_burn_rate_5m, cfg_.steady_state_s);
  if (preflight_->verdict == "ready") return {};
  std::string why;
  for (const auto& r : preflight_->refusals) why += (why.empty() ? "" : "; ") + r.code + ": " + r.message;
  if (why.empty())
    why = "untested: no series of " + cfg_.service.name + " matches now, so the comparison was never tried";
  return input_error(0, "the SLO watchdog's preflight refused it: " + why);
}

GuardrailReading SloWatchdog::read() {
  GuardrailReading r;
  const std::string q = "max(" + slo_selector(cfg_.service, cfg_.service.slo.burn_rate_5m) + ")";
  auto v = prom_->value(q);
  last_.reset();
  if (!v || std::isnan(*v)) {
    r.healthy = false;
    r.problem = "Prometheus is silent on " + q + " (" + (v ? std::string("NaN") : v.error().describe()) +
                "): a watchdog that cannot see aborts";
  } else {
    last_ = *v;
    r.values["burn_rate_5m"] = *v;
    if (*v > limit_) {
      r.healthy = false;
      r.problem = cfg_.service.name + " burns its error budget " + rate_text(*v) +
                  "x over 5m, above abort_burn_rate_5m " + rate_text(limit_);
    }
  }
  if (!r.healthy && !aborted_ && !fault_over_) {
    aborted_ = true;
    at_abort_ = last_;
  }
  return r;
}

nlohmann::json SloWatchdog::describe() const {
  return {{"slo_watchdog",
           {{"service", cfg_.service.name},
            {"series", slo_selector(cfg_.service, cfg_.service.slo.burn_rate_5m)},
            {"abort_burn_rate_5m", limit_},
            {"interval_s", static_cast<double>(cfg_.interval_ns) / 1e9},
            {"prometheus", prom_->where()}}}};
}

std::string SloWatchdog::summary() const {
  std::string s = slo_selector(cfg_.service, cfg_.service.slo.burn_rate_5m) + " at " + prom_->where() + " every " +
                  rate_text(static_cast<double>(cfg_.interval_ns) / 1e9) + "s, unhealthy above " + rate_text(limit_);
  if (limit_ != cfg_.abort_burn_rate_5m) s += " (asked " + rate_text(cfg_.abort_burn_rate_5m) + ", clamped to 2-10)";
  return s + " or when Prometheus is silent";
}

nlohmann::json SloWatchdog::event(const GuardrailReading& r) const {
  nlohmann::json j{{"event", "slo_watchdog"}, {"healthy", r.healthy}};
  j["burn_rate_5m"] = last_ ? nlohmann::json(*last_) : nlohmann::json(nullptr);
  if (!r.problem.empty()) j["problem"] = r.problem;
  return j;
}

nlohmann::json SloWatchdog::outcome_json() const {
  if (!aborted_) return {{"outcome", "completed"}};
  return {{"outcome", "aborted"},
          {"burn_rate_at_abort", at_abort_ ? nlohmann::json(*at_abort_) : nlohmann::json(nullptr)}};
}

}  // namespace faultline
