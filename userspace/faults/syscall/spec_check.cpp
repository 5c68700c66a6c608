// Syscall fault checks shared by faultctl, faultcp and faultd (moved here from
// ctl/syscall_args.cpp, where the flag parser now calls them).
#include "userspace/faults/syscall/spec_check.h"

#include <seccomp.h>

#include <cerrno>
#include <cmath>

#include "base/units.h"
#include "userspace/faults/syscall/path_args.h"

namespace faultline {
namespace {

Error syscall_bad_flag(std::string message) { return input_error(EINVAL, std::move(message)); }

}  // namespace

std::string syscall_name_problem(const std::string& n) {
  if (n.empty()) return "an empty name";
  if (!is_socket_syscall(n) && seccomp_syscall_resolve_name(n.c_str()) == __NR_SCMP_ERROR)
    return "no such syscall on this architecture";
  if (n == "exit" || n == "exit_group" || n == "rt_sigreturn") return "cannot be failed (it does not return)";
  return "";
}

Status validate(const SyscallFaultSpec& s) {
  if (s.syscalls.empty())
    return syscall_bad_flag("--syscall is required (e.g. --syscall connect or --syscall openat,read)");
  for (const auto& n : s.syscalls) {
    const std::string why = syscall_name_problem(n);
    if (!why.empty()) return syscall_bad_flag(n.empty() ? "--syscall: " + why : "--syscall " + n + ": " + why);
  }
  if (s.err <= 0) return syscall_bad_flag("--errno is required (e.g. --errno EIO)");
  if (!std::isfinite(s.percent) || s.percent < 0 || s.percent > 100)
    return syscall_bad_flag("--percent must be within 0-100");
  if (s.duration_ns == 0) return syscall_bad_flag("--duration is required (at most 1h), e.g. --duration 30s");
  if (s.duration_ns > SyscallCaps::kMaxDurationNs) return syscall_bad_flag("--duration is over the cap of 1h");
  if (s.duration_ns < SyscallCaps::kMinDurationNs) return syscall_bad_flag("--duration must be at least 100ms");
  const int scopes = (s.cgroup.empty() ? 0 : 1) + (s.pid != 0 ? 1 : 0) + (s.command.empty() ? 0 : 1);
  if (scopes != 1) return syscall_bad_flag("give exactly one scope: --cgroup PATH, --pid PID, or -- COMMAND ARGS");
  if (s.pid != 0 && s.pid <= 1)
    return syscall_bad_flag("--pid " + std::to_string(s.pid) + ": not a process id above 1");
  if (s.pid != 0 && static_cast<uint64_t>(s.pid) > SyscallCaps::kMaxPid)
    return syscall_bad_flag("--pid " + std::to_string(s.pid) + ": at most " + std::to_string(SyscallCaps::kMaxPid));
  if (s.after > SyscallCaps::kMaxInjections)
    return syscall_bad_flag("--after " + std::to_string(s.after) + ": too large, expected a whole number from 1 to " +
                            std::to_string(SyscallCaps::kMaxInjections));
  if (s.max_injections > SyscallCaps::kMaxInjections)
    return syscall_bad_flag("--max-injections " + std::to_string(s.max_injections) +
                            ": too large, expected a whole number from 1 to " +
                            std::to_string(SyscallCaps::kMaxInjections));
  if (s.start_after_ns != 0 && s.start_after_ns >= s.duration_ns)
    return syscall_bad_flag("--start-after " + format_duration(s.start_after_ns) + " is not shorter than --duration " +
                            format_duration(s.duration_ns) + ": the fault would never start");
  for (const auto& p : s.paths) {
    if (p.empty())
      return syscall_bad_flag("--path: an empty prefix (give an absolute folder, e.g. --path /var/lib/app/)");
    if (p.front() != '/') return syscall_bad_flag("--path " + p + ": not absolute (a prefix starts with '/')");
    if (p.size() >= SyscallCaps::kMaxPathBytes)
      return syscall_bad_flag("--path: a prefix of " + std::to_string(p.size()) + " bytes, over PATH_MAX");
  }
  if (s.paths.size() > SyscallCaps::kMaxPaths)
    return syscall_bad_flag("--path: at most " + std::to_string(SyscallCaps::kMaxPaths) + " prefixes");
  if (!s.paths.empty()) {
    for (const auto& n : s.syscalls) {
      if (is_socket_syscall(n))
        return syscall_bad_flag("--path cannot apply to --syscall " + n + ": a socket syscall names no path");
      if (path_args_of(n).empty())
        return syscall_bad_flag("--path cannot apply to --syscall " + n +
                                ": it takes no path (file syscalls: " + path_syscall_names() + ")");
    }
  }
  if (!s.via.empty() && s.via != "cgroup" && s.via != "lsm" && s.via != "seccomp")
    return syscall_bad_flag("--via " + s.via + ": one of cgroup, lsm, seccomp");
  return {};
}

}  // namespace faultline
