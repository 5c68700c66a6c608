// A resource experiment of faultcp's spec model ("kind": "process", "cpu",
// "memory" or "disk", as `faultctl run KIND`) read into the ResourceSpec the
// CLI builds from its flags: the fields are the flags in snake_case (pid,
// name, cgroup, action, signal, force; cores, load; size; path, fill,
// min_free; duration_sec), sizes written as the flags take them ("512MiB"),
// checked by the same validate().
#pragma once

#include <nlohmann/json.hpp>
#include <span>

#include "base/result.h"
#include "userspace/faults/experiment_field.h"
#include "userspace/faults/resource/spec.h"
#include "userspace/faults/spec_fields.h"

namespace faultline {

// Every resource field an experiment may carry (duration_sec included; kind
// and the guardrails are not), each with its flag, unit, range and help;
// which of them a kind takes is checked by the reader.
[[nodiscard]] std::span<const ExperimentField> resource_experiment_fields();
// The `faultctl run process|cpu|memory|disk` flag of each field.
[[nodiscard]] std::span<const FlagField> resource_flag_fields();

// Reads and checks them (errors "spec.<field>: why", bad input).
[[nodiscard]] Result<ResourceSpec> resource_spec_from_json(const nlohmann::json& spec);

}  // namespace faultline
