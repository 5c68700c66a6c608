// Flag parsing for `faultctl run syscall` and `faultctl guard`.
#pragma once

#include <string>
#include <vector>

#include "loader/result.h"
#include "userspace/faults/syscall_fault.h"
#include "userspace/policy/guard.h"

namespace faultline {

[[nodiscard]] Result<SyscallFaultSpec> parse_syscall_args(const std::vector<std::string>& args);
[[nodiscard]] Result<GuardOptions> parse_guard_args(const std::vector<std::string>& args);

}  // namespace faultline
