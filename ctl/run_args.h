// `faultctl run` flags -> ExperimentOptions, with one-line errors naming the flag.
#pragma once

#include <string>
#include <vector>

#include "loader/result.h"
#include "userspace/faults/experiment.h"

namespace faultline {

// args are what follows "run" on the command line.
[[nodiscard]] Result<ExperimentOptions> parse_run_args(const std::vector<std::string>& args);

[[nodiscard]] std::string run_usage();

}  // namespace faultline
