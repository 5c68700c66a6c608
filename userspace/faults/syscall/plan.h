// faultctl run syscall: make chosen syscalls fail with an errno, by the best
// mechanism the kernel offers for each. This file is the ladder: which rung
// serves a request here, or why none can.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

enum class SyscallMechanism {
  CgroupSockAddr,  // cgroup connect/sendmsg/bind/sock_create + bpf_set_retval
  BpfLsm,          // BPF LSM hooks (open, exec, connect, read/write, unlink), any scope
  SeccompNotify,   // seccomp user notification, for a wrapped command
};
[[nodiscard]] const char* mechanism_name(SyscallMechanism m);  // "cgroup" | "lsm" | "seccomp"

struct SyscallFaultSpec {
  std::vector<std::string> syscalls;  // "connect", "openat", ...
  int err = 0;                        // errno to return
  double percent = 100;
  uint64_t duration_ns = 0;
  std::string cgroup;                // scope: an existing cgroup v2
  int pid = 0;                       // scope: one process (its cgroup + a pid filter)
  std::vector<std::string> command;  // scope: a command we start
  bool include_loader = false;       // seccomp, LSM: also fail the dynamic loader's library opens
  std::string via;                   // force a rung: "cgroup", "lsm" or "seccomp"; "" = the best one
  uint64_t after = 0;                // the first N matching calls pass untouched
  uint64_t max_injections = 0;       // 0 = no cap; else at most N calls fail
  uint64_t start_after_ns = 0;       // every call passes until this long after arming
  std::vector<std::string> paths;    // --path: normalized absolute prefixes; only calls naming a path
                                     // under one are candidates (seccomp only: path_args.h)
  // The seed of the --percent draw (--seed, or drawn when not given). The
  // seccomp and cgroup rungs draw from it; the LSM programs draw with
  // bpf_get_prandom_u32, so a run there keeps no seed (see seeds_honoured()).
  std::optional<uint64_t> seed;
  bool seed_drawn = false;

  // "EIO on openat,read at 30% for 10s": what the fault does, for people.
  [[nodiscard]] std::string describe() const;
  // The brakes that are set, for the plan, the record and status: {"after",
  // "max_injections", "start_after"}; empty when none is.
  [[nodiscard]] nlohmann::json brakes_json() const;
};

struct SyscallPlan {
  SyscallMechanism mechanism;
  std::string why;  // the ladder as decided, for --dry-run and logs
};

// Whether a mechanism's --percent draw follows a seed: seccomp's (in userspace)
// and the cgroup hooks' (fl_sa_rng) do; the LSM programs draw with
// bpf_get_prandom_u32.
[[nodiscard]] bool seeds_honoured(SyscallMechanism m);

// Which mechanism serves the request here, or why none can (bad input: the
// request cannot be served on this kernel).
[[nodiscard]] Result<SyscallPlan> plan_syscall_fault(const SyscallFaultSpec& spec);

// The socket-family syscalls the cgroup hooks can fail.
[[nodiscard]] bool is_socket_syscall(const std::string& name);

// The LSM hooks that see a list of syscalls.
struct LsmCoverage {
  uint32_t ops = 0;     // FL_SC_BIT set
  std::string hooks;    // "file_open, file_permission"
  std::string missing;  // syscalls no hook serves
};
[[nodiscard]] LsmCoverage lsm_coverage(const std::vector<std::string>& syscalls);

}  // namespace faultline
