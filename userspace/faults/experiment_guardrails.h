// The part of a typed experiment every family shares: its guardrails and its
// record, as the JSON fields of an experiment (faultcp's spec model, faultd's
// dispatched runs) and the `faultctl run` flags that spell them. One table, one
// reader and one writer, so faultcp, faultd and faultctl refuse the same values
// with the same words and nothing translates the fields by hand.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "base/result.h"
#include "userspace/faults/experiment_field.h"
#include "userspace/guardrails/guardrail_options.h"
#include "userspace/run/record.h"

namespace faultline {

// The guardrail and record fields: interval, health_url, health_ca,
// health_max_latency, prometheus_url, prometheus_ca, query, abort_above,
// abort_below, kernel_signal, hypothesis, steady_state. The durations
// (interval, health_max_latency, steady_state) are written as their flags take
// them ("250ms", "2m"), in the flags' ranges; their old spellings, a whole
// number under interval_sec, interval_ms, health_max_latency_ms or
// steady_state_sec (the rows' aliases), are read for one release (deprecated).
// The `faultctl run` flags of the rows take their --help and their ranges
// from here (ctl/run_flags.cpp).
[[nodiscard]] std::span<const ExperimentField> guardrail_fields();

// The row of `field` (a name of the table: aborts on another).
[[nodiscard]] const ExperimentField& guardrail_field(const char* field);

// Whether `field` is one of guardrail_fields(), or an alias of one.
[[nodiscard]] bool is_guardrail_field(const std::string& field);

// A duration field of spec (steady_state, interval, health_max_latency, or
// its deprecated alias) in ns; nullopt when absent or not valid (the reader
// says why).
[[nodiscard]] std::optional<uint64_t> guardrail_duration_ns(const nlohmann::json& spec, const char* field);

struct ExperimentGuardrails {
  GuardrailOptions guardrails;
  std::optional<RecordOptions> record;  // with a hypothesis
};

// Reads and checks the shared fields of spec (the others are the family's).
// netns is where the health probe and the kernel signal look (the fault's
// namespace); record_dir where a hypothesis' record goes (empty: checked, not
// run). Errors read "spec.<field>: why" and are bad input.
[[nodiscard]] Result<ExperimentGuardrails> guardrails_from_json(const nlohmann::json& spec, const std::string& netns,
                                                                const std::string& record_dir);

// Writes them into spec (the durations as strings). What the fields cannot
// hold is refused, naming the flag: an --abort-above for both a --query and a
// --kernel-signal, the guardrails an experiment does not carry (--slo-burn-rate,
// --signal-window, ...: give those to `faultctl run` on the host).
[[nodiscard]] Status guardrails_to_json(const GuardrailOptions& g, const std::optional<RecordOptions>& record,
                                        nlohmann::json& spec);

// Whole units of a duration for an integer field ("--duration 1500ms: an
// experiment takes whole seconds"): ns divided by unit_ns.
[[nodiscard]] Result<uint64_t> whole_units(uint64_t ns, uint64_t unit_ns, const std::string& flag);

}  // namespace faultline
