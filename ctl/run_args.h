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

// Flags every `faultctl run` shares, packet and resource faults alike: the
// experiment record (--hypothesis, --steady-state, --record, --slo).
void add_record_options(cxxopts::Options& o);
// duration and interval are the run's (the record needs at least one reading of
// the fault); args is the command line after "run", kept in the record.
[[nodiscard]] Result<std::optional<RecordOptions>> parse_record_flags(const cxxopts::ParseResult& r, bool has_guardrail,
                                                                      uint64_t duration_ns, uint64_t interval_ns,
                                                                      const std::vector<std::string>& args);

}  // namespace faultline
