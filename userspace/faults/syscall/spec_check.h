// The checks of a syscall fault that need nothing from the running kernel:
// names, errno, percent, duration and brake caps, one scope, --path prefixes,
// --via. One place for `faultctl run syscall`, faultcp (a spec before it is
// stored) and faultd (a spec before it runs); errors name the flag.
#pragma once

#include <string>

#include "base/result.h"
#include "userspace/faults/syscall/plan.h"

namespace faultline {

// The same bounds as packet faults' (FaultCaps), which this family may not include.
struct SyscallCaps {
  static constexpr uint64_t kMaxDurationNs = 3600ULL * 1'000'000'000ULL;  // 1h
  static constexpr uint64_t kMinDurationNs = 100'000'000ULL;              // 100ms
  static constexpr uint64_t kMaxInjections = 1'000'000'000ULL;            // --after, --max-injections
  static constexpr uint64_t kMaxPid = 4'194'304;                          // PID_MAX_LIMIT
  static constexpr size_t kMaxPaths = 16;
  static constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX
};

// One --syscall name: "" if it can be failed here, else why not (the caller
// names the flag): "no such syscall on this architecture".
[[nodiscard]] std::string syscall_name_problem(const std::string& name);

[[nodiscard]] Status validate(const SyscallFaultSpec& spec);

}  // namespace faultline
