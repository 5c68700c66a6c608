// A packet experiment ("kind": "loss", "latency", ...) of the typed experiment
// model: its fields (kind, target, dev, netns, percent, delay_ms, jitter_ms,
// duration_sec), read into the FaultSpec `faultctl run KIND` builds from its
// flags and checked by the same validate(); and written back from one. The
// target is an address or CIDR prefix (a name would be resolved where the spec
// is read, not where the fault runs).
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

// The fields of s. What they cannot hold is refused naming the flag: several
// targets, a sub-millisecond delay, a fault scoped by flags the model does not
// carry yet (--port, --domains, ...: run those with `faultctl run` on the host).
[[nodiscard]] Result<nlohmann::json> packet_spec_to_json(const FaultSpec& s);

}  // namespace faultline
