// Flag parsing for `faultctl run syscall` and `faultctl guard`.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/help.h"
#include "ctl/run_flags.h"
#include "userspace/faults/syscall/plan.h"
#include "userspace/enforce/guard.h"

namespace faultline {

struct SyscallRunArgs {
  SyscallFaultSpec spec;
  RunFlags flags;
};

[[nodiscard]] Result<Parsed<SyscallRunArgs>> parse_syscall_args(const std::vector<std::string>& args);
[[nodiscard]] Result<Parsed<GuardOptions>> parse_guard_args(const std::vector<std::string>& args);

}  // namespace faultline
