// An experiment's spec as operators script it: the typed experiment's JSON
// (userspace/ops/experiment.h; each family's fields in its experiment.h),
// checked before anything is stored or reaches an agent.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "cp/api/api_error.h"

namespace faultline::cp {

// The first problem, naming the field ("spec.delay_ms"); none if the spec is good.
[[nodiscard]] std::optional<ApiError> check_experiment_spec(const nlohmann::json& spec);

}  // namespace faultline::cp
