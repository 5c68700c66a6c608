// `faultctl run` flags -> ExperimentOptions, with one-line errors naming the flag.
#pragma once

#include <cxxopts.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loader/result.h"
#include "userspace/faults/experiment.h"
#include "userspace/faults/record.h"

namespace faultline {

// args are what follows "run" on the command line.
[[nodiscard]] Result<ExperimentOptions> parse_run_args(const std::vector<std::string>& args);

[[nodiscard]] std::string run_usage();

// Parses the words after "run" with o; a parse error or a stray word is a
// one-line EINVAL error naming it.
[[nodiscard]] Result<cxxopts::ParseResult> parse_run_words(cxxopts::Options& o, const std::vector<std::string>& args);

// Flags every `faultctl run` shares, packet and resource faults alike: the
// experiment record (--hypothesis, --steady-state, --record, --slo).
void add_record_options(cxxopts::Options& o);
// duration and interval are the run's (the record needs at least one reading of
// the fault); args is the command line after "run", kept in the record.
[[nodiscard]] Result<std::optional<RecordOptions>> parse_record_flags(const cxxopts::ParseResult& r, bool has_health,
                                                                      bool has_kernel_signal, uint64_t duration_ns,
                                                                      uint64_t interval_ns,
                                                                      const std::vector<std::string>& args);

// The guardrail flags, shared the same way: --health-url (+ --health-max-latency,
// --interval) and --kernel-signal (+ --abort-above, --signal-window).
[[nodiscard]] Result<std::optional<HealthProbeConfig>> parse_health_flags(const cxxopts::ParseResult& r,
                                                                          const std::string& netns);
[[nodiscard]] Result<std::optional<KernelSignalConfig>> parse_kernel_signal_flags(const cxxopts::ParseResult& r);

}  // namespace faultline
