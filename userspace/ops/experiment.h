// The typed experiment: one fault of a family (packet, syscall, resource,
// tcp/http stream) with its guardrails and record, read from and written to
// the JSON that every door carries -- faultcp checks a submitted spec with
// experiment_from_json(), faultd's agent runs what it reads, and
// `faultctl run --control-plane` sends experiment_to_json() of what its flags
// parsed to. The fields of each family are listed once, in its experiment.h.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>

#include "base/result.h"
#include "userspace/faults/packet/spec.h"
#include "userspace/faults/resource/spec.h"
#include "userspace/faults/stream/spec.h"
#include "userspace/faults/syscall/plan.h"
#include "userspace/guardrails/guardrail_options.h"
#include "userspace/run/record.h"

namespace faultline {

struct Experiment {
  std::variant<FaultSpec, SyscallFaultSpec, ResourceSpec, TcpFaultSpec> fault;
  GuardrailOptions guardrails;
  std::optional<RecordOptions> record;  // with a hypothesis
};

// Reads and checks an experiment; an error names the field ("spec.delay_ms:
// must be within 0-60000 (got 70000)") and is bad input. record_dir is where a
// hypothesis' record goes (a new folder; empty when only checking).
[[nodiscard]] Result<Experiment> experiment_from_json(const nlohmann::json& spec, const std::string& record_dir);

// The family of a spec's kind ("packet", "syscall", "resource", "tcp", "http"),
// or none for a kind no family has.
[[nodiscard]] std::optional<std::string> experiment_family(const std::string& kind);

// The guardrails and record of an experiment, written into a family's fields
// (what the fault's own writer made). Errors name the flag that cannot be carried.
[[nodiscard]] Status add_experiment_guardrails(const GuardrailOptions& g, const std::optional<RecordOptions>& record,
                                               nlohmann::json& spec);

}  // namespace faultline
