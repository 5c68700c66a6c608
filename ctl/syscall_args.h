// `faultctl run syscall` flags -> a SyscallFaultSpec, with one-line errors naming the flag.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/flag_words.h"
#include "ctl/help.h"
#include "ctl/run_flags.h"
#include "userspace/faults/syscall/plan.h"

namespace faultline {

struct SyscallRunArgs {
  SyscallFaultSpec spec;
  RunFlags flags;
};

// args are what follows "run syscall": flags, and for the command scope "--" and the command.
[[nodiscard]] Result<Parsed<SyscallRunArgs>> parse_syscall_args(const std::vector<std::string>& args);

// Its flags, and whether each takes a value.
[[nodiscard]] FlagTable syscall_run_flags();

}  // namespace faultline
