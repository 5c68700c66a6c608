// The watchdog's preflight, before a fault starts: a watchdog that cannot see
// the service (no samples of its SLO series over the steady state) is refused
// by the series' name, and its comparison is tested on a known positive (it
// must breach with the limit just under the current reading) and must hold as
// set. When nothing matches now the comparison could not be tried: "untested",
// never passed as held.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/orchestration/facts.h"
#include "userspace/orchestration/service.h"
#include "userspace/orchestration/validator.h"

namespace faultline {

// abort_burn_rate_5m is kept within [2, 10]: below 2 a normal day's noise
// aborts, above 10 the budget of hours is gone before the watchdog acts.
inline constexpr double kMinAbortBurnRate = 2.0, kMaxAbortBurnRate = 10.0;
[[nodiscard]] double clamp_abort_burn_rate(double requested);

// The watchdog's comparison, evaluated by Prometheus: does any series of the
// service's burn_rate_5m stand above `limit` now? None when no series of the
// service matches now (nothing to compare).
[[nodiscard]] Result<std::optional<bool>> burn_rate_breaches(InstantQuery& prom, const ServiceSpec& s, double limit);

struct PreflightResult {
  std::string verdict;            // "ready", "refused" or "untested"
  std::string comparison;         // "verified", "failed" or "untested"
  double requested = 0;           // abort_burn_rate_5m as asked
  double limit = 0;               // as clamped
  std::optional<double> reading;  // burn_rate_5m now (the max over the service's series)
  std::vector<Refusal> refusals;  // blind_watchdog, no_known_positive, breaches_as_set, fact_unreadable
  [[nodiscard]] nlohmann::json to_json() const;
};

// steady_state_s: how far back every SLO series must have the service's
// samples (the steady state measured before the fault).
[[nodiscard]] PreflightResult watchdog_preflight(InstantQuery& prom, const ServiceSpec& s, double abort_burn_rate_5m,
                                                 int64_t steady_state_s);

}  // namespace faultline
