// A TCP or HTTP experiment of faultcp's spec model ("kind": "tcp") read into the
// TcpFaultSpec `faultctl run tcp` builds from its flags: target, toxic (an
// array of --toxic texts), direction, toxicity, cgroup, drain_ms and
// duration_sec, checked by the same parse_toxics() and validate(). The target's
// host is an address or CIDR prefix (a name would be resolved where the spec is
// read, not where the fault runs); no command to wrap.
#pragma once

#include <nlohmann/json.hpp>
#include <span>

#include "base/result.h"
#include "userspace/faults/experiment_field.h"
#include "userspace/faults/spec_fields.h"
#include "userspace/faults/stream/spec.h"

namespace faultline {

// The tcp fields of an experiment (duration_sec included; kind and the
// guardrails are not), each with its flag, unit, range and help.
[[nodiscard]] std::span<const ExperimentField> tcp_experiment_fields();
// The `faultctl run tcp` flag of each field.
[[nodiscard]] std::span<const FlagField> tcp_flag_fields();

// A default toxicity within its row's range; text is the value as written
// ("--toxicity 1.5: a share of connections from 0 to 1 (e.g. 0.3)").
[[nodiscard]] Status check_toxicity(double v, const std::string& text);

// Reads and checks them (errors "spec.<field>: why", bad input).
[[nodiscard]] Result<TcpFaultSpec> tcp_spec_from_json(const nlohmann::json& spec);

// An HTTP experiment ("kind": "http"): the `faultctl run http` flags in
// snake_case -- target (address or CIDR, no name), one fault (status with body
// and content_type, delay_ms with delay_at, reset, truncate, abort_stream, or
// llm with llm_provider and retry_after), the match (method, path, host,
// header_equals and header_contains: arrays of NAME=VALUE texts), percent,
// attempts, tls, terminate_tls, upstream_ca (a file on the agent's host),
// cgroup, drain_ms -- each written as the flag's text and judged by the same
// http_fault_from_flags() and validate(). No command to wrap.
[[nodiscard]] std::span<const ExperimentField> http_experiment_fields();
// The `faultctl run http` flag of each field.
[[nodiscard]] std::span<const FlagField> http_flag_fields();
[[nodiscard]] Result<TcpFaultSpec> http_spec_from_json(const nlohmann::json& spec);

}  // namespace faultline
