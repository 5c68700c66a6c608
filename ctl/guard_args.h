// `faultctl guard` flags -> GuardOptions, with one-line errors naming the flag.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/help.h"
#include "userspace/enforce/guard.h"

namespace faultline {

// args are what follows "guard": flags, then "--" and the command to guard.
[[nodiscard]] Result<Parsed<GuardOptions>> parse_guard_args(const std::vector<std::string>& args);

}  // namespace faultline
