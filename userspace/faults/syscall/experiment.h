// A syscall experiment of faultcp's spec model ("kind": "syscall") read into
// the SyscallFaultSpec `faultctl run syscall` builds from its flags: the fields
// are the flags in snake_case (syscall, errno, percent, cgroup, pid, via,
// after, max_injections, start_after_ms, include_loader; duration_sec), checked
// by the same validate(). What a spec cannot carry: a command to wrap (a
// control plane does not start programs on a host; so neither --path nor --via
// seccomp, which serve one) and --seed.
#pragma once

#include <nlohmann/json.hpp>
#include <span>

#include "base/result.h"
#include "userspace/faults/experiment_field.h"
#include "userspace/faults/spec_fields.h"
#include "userspace/faults/syscall/plan.h"

namespace faultline {

// The syscall fields of an experiment (duration_sec included; kind and the
// guardrails are not), each with its flag, unit, range and help.
[[nodiscard]] std::span<const ExperimentField> syscall_experiment_fields();
// The `faultctl run syscall` flag of each field.
[[nodiscard]] std::span<const FlagField> syscall_flag_fields();

// Reads and checks them (errors "spec.<field>: why", bad input). The seed of
// a percent is drawn (and recorded by the run), as `faultctl run` does.
[[nodiscard]] Result<SyscallFaultSpec> syscall_spec_from_json(const nlohmann::json& spec);

}  // namespace faultline
