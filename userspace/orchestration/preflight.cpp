// The watchdog's preflight: every question asked of Prometheus itself, with
// the service's own label, so the check sees what the watchdog will see.
#include "userspace/orchestration/preflight.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace faultline {
namespace {

std::string promql_number(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string short_number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

double clamp_abort_burn_rate(double requested) {
  if (std::isnan(requested)) return kMinAbortBurnRate;
  return std::clamp(requested, kMinAbortBurnRate, kMaxAbortBurnRate);
}

Result<std::optional<bool>> burn_rate_breaches(InstantQuery& prom, const ServiceSpec& s, double limit) {
  const std::string sel = slo_selector(s, s.slo.burn_rate_5m);
  auto present = prom.value("count(" + sel + ") or vector(0)");
  if (!present) return present.error();
  if (*present == 0) return std::optional<bool>();
  auto above = prom.value("count(" + sel + " > " + promql_number(limit) + ") or vector(0)");
  if (!above) return above.error();
  return std::optional<bool>(*above > 0);
}

nlohmann::json PreflightResult::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : refusals) list.push_back({{"code", r.code}, {"message", r.message}});
  return {{"verdict", verdict},
          {"comparison", comparison},
          {"abort_burn_rate_5m", limit},
          {"requested", requested},
          {"clamped", limit != requested},
          {"burn_rate_5m", reading ? nlohmann::json(*reading) : nlohmann::json(nullptr)},
          {"refusals", list}};
}

PreflightResult watchdog_preflight(InstantQuery& prom, const ServiceSpec& s, double abort_burn_rate_5m,
                                   int64_t steady_state_s) {
  PreflightResult r;
  r.requested = abort_burn_rate_5m;
  r.limit = clamp_abort_burn_rate(abort_burn_rate_5m);
  r.comparison = "untested";
  auto refuse = [&](const char* code, std::string message) { r.refusals.push_back({code, std::move(message)}); };

  // A blind watchdog: a series with no sample of this service over the steady state.
  const std::string range = "[" + std::to_string(std::max<int64_t>(steady_state_s, 1)) + "s]";
  for (const std::string* series : {&s.slo.burn_rate_5m, &s.slo.burn_rate_1h, &s.slo.budget_remaining}) {
    const std::string sel = slo_selector(s, *series);
    auto n = prom.value("sum(count_over_time(" + sel + range + ")) or vector(0)");
    if (!n)
      refuse("fact_unreadable", sel + " could not be read at " + prom.where() + ": " + n.error().describe());
    else if (*n == 0)
      refuse("blind_watchdog", sel + " has no samples over the last " + std::to_string(steady_state_s) +
                                   " s: a watchdog on it would see nothing");
  }

  // The known positive: the comparison must breach just under the current
  // reading, and hold at the limit as set.
  const std::string sel5m = slo_selector(s, s.slo.burn_rate_5m);
  auto present = prom.value("count(" + sel5m + ") or vector(0)");
  auto now = present && *present > 0 ? prom.value("max(" + sel5m + ")") : Result<double>(std::nan(""));
  if (!present || !now) {
    refuse("fact_unreadable", sel5m + " could not be read at " + prom.where() + ": " +
                                  (!present ? present.error() : now.error()).describe());
  } else if (!std::isnan(*now)) {
    r.reading = *now;
    const double under = *now - std::max(1e-6, std::fabs(*now) * 1e-6);
    auto positive = burn_rate_breaches(prom, s, under);
    auto as_set = burn_rate_breaches(prom, s, r.limit);
    if (!positive || !as_set) {
      refuse("fact_unreadable", "the comparison could not be evaluated at " + prom.where() + ": " +
                                    (!positive ? positive.error() : as_set.error()).describe());
    } else if (!*positive || !*as_set) {
      r.comparison = "untested";  // the series went away between the queries
    } else if (!**positive) {
      r.comparison = "failed";
      refuse("no_known_positive", "the comparison did not breach with the limit at " + short_number(under) +
                                      ", just under the reading " + short_number(*now) +
                                      ": it cannot be trusted to abort");
    } else if (**as_set) {
      r.comparison = "verified";
      refuse("breaches_as_set", s.slo.burn_rate_5m + " of " + s.name + " reads " + short_number(*now) +
                                    ", above the abort limit " + short_number(r.limit) +
                                    " already: the run would abort at once");
    } else {
      r.comparison = "verified";
    }
  }
  // Nothing matches now (or NaN): the comparison was never tried.
  r.verdict = !r.refusals.empty() ? "refused" : r.comparison == "verified" ? "ready" : "untested";
  return r;
}

}  // namespace faultline
