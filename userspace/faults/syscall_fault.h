// faultctl run syscall: make chosen syscalls fail with an errno, by the best
// mechanism the kernel offers for each.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "loader/result.h"

namespace faultline {

enum class SyscallMechanism {
  CgroupSockAddr,  // cgroup connect/sendmsg/bind/sock_create + bpf_set_retval
  BpfLsm,          // BPF LSM hooks (open, exec, connect, read/write, unlink), any scope
  SeccompNotify,   // seccomp user notification, for a wrapped command
};

struct SyscallFaultSpec {
  std::vector<std::string> syscalls;  // "connect", "openat", ...
  int err = 0;                        // errno to return
  double percent = 100;
  uint64_t duration_ns = 0;
  std::string cgroup;                 // scope: an existing cgroup v2
  int pid = 0;                        // scope: one process (its cgroup + a pid filter)
  std::vector<std::string> command;   // scope: a command we start
  bool include_loader = false;        // seccomp, LSM: also fail the dynamic loader's library opens
  std::string via;                    // force a rung: "cgroup", "lsm" or "seccomp"; "" = the best one
  bool dry_run = false;
  bool json = false;
};

struct SyscallPlan {
  SyscallMechanism mechanism;
  std::string why;  // the ladder as decided, for --dry-run and logs
};

// Which mechanism serves the request here, or why none can.
[[nodiscard]] Result<SyscallPlan> plan_syscall_fault(const SyscallFaultSpec& spec);

// Runs the fault to its end; returns the exit code (the command's, when one is wrapped).
[[nodiscard]] int run_syscall_fault(const SyscallFaultSpec& spec, std::ostream& out, std::ostream& err);

// The socket-family syscalls the cgroup hooks can fail.
[[nodiscard]] bool is_socket_syscall(const std::string& name);

}  // namespace faultline
