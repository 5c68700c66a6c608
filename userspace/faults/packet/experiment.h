// A packet experiment ("kind": "loss", "latency", ...) of the typed experiment
// model: one field per `faultctl run KIND` flag (the table, with each field's
// flag, unit and help), read into the FaultSpec the CLI builds from its flags,
// with the CLI's value parsers and validate(); and written back from one. A
// target is an address or CIDR prefix, or an array of them (a name is
// resolved where the spec is written, not where the fault runs).
#pragma once

#include <nlohmann/json.hpp>
#include <span>

#include "base/result.h"
#include "userspace/faults/experiment_guardrails.h"
#include "userspace/faults/packet/spec.h"

namespace faultline {

// The packet fields of an experiment (kind and duration_sec included).
[[nodiscard]] std::span<const ExperimentField> packet_experiment_fields();

// Reads and checks them (errors "spec.<field>: why", bad input). A kind with a
// random decision gets a drawn seed, recorded by the run, as `faultctl run` does.
[[nodiscard]] Result<FaultSpec> packet_spec_from_json(const nlohmann::json& spec);

// The fields of s: every flag's value. What they cannot hold is refused,
// naming the flag: a duration in fractions of a second, a delay, jitter or
// start in fractions of a millisecond.
[[nodiscard]] Result<nlohmann::json> packet_spec_to_json(const FaultSpec& s);

}  // namespace faultline
