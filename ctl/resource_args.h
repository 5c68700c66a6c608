// `faultctl run process|cpu|memory|disk` flags -> a ResourceSpec, with one-line
// errors naming the flag.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/flag_words.h"
#include "ctl/help.h"
#include "ctl/run_flags.h"
#include "userspace/faults/resource/spec.h"

namespace faultline {

struct ResourceRunArgs {
  ResourceSpec spec;
  RunFlags flags;
};

// args are what follows "run" (the kind first).
[[nodiscard]] Result<Parsed<ResourceRunArgs>> parse_resource_args(const std::vector<std::string>& args);
[[nodiscard]] std::string resource_run_usage();

// Its flags, and whether each takes a value.
[[nodiscard]] FlagTable resource_run_flags();

}  // namespace faultline
