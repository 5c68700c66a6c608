// An experiment's spec as operators script it (the faultctl run names:
// kind, dev, target, delay_ms, jitter_ms, percent, duration_sec, grace_sec,
// interval_sec, health_url, health_max_latency_ms, prometheus_url, query,
// abort_above, abort_below, kernel_signal; and netns, hypothesis,
// steady_state_sec for the agent's run), checked against the CLI's own caps
// before anything is stored or reaches an agent.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "cp/api/api_error.h"

namespace faultline::cp {

// The first problem, naming the field ("spec.delay_ms"); none if the spec is good.
[[nodiscard]] std::optional<ApiError> check_experiment_spec(const nlohmann::json& spec);

}  // namespace faultline::cp
