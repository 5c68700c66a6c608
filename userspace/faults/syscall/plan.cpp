// The syscall fault ladder: cgroup socket hooks where they serve, then BPF LSM
// hooks, else seccomp user notification for a wrapped command.
#include "userspace/faults/syscall/plan.h"

#include <algorithm>
#include <sstream>

#include "base/errno_names.h"
#include "base/units.h"
#include "faultline/syscall_abi.h"
#include "loader/features.h"

namespace faultline {
namespace {

// The LSM rung's operations: each syscall name maps to the one hook that sees it.
struct LsmOp {
  const char* syscall;
  fl_sc_op op;
  const char* hook;
};
constexpr LsmOp kLsmOps[] = {
    {"open", FL_SC_OPEN, "file_open"},
    {"openat", FL_SC_OPEN, "file_open"},
    {"openat2", FL_SC_OPEN, "file_open"},
    {"creat", FL_SC_OPEN, "file_open"},
    {"execve", FL_SC_EXEC, "bprm_check_security"},
    {"execveat", FL_SC_EXEC, "bprm_check_security"},
    {"connect", FL_SC_CONNECT, "socket_connect"},
    {"read", FL_SC_READ, "file_permission"},
    {"readv", FL_SC_READ, "file_permission"},
    {"pread64", FL_SC_READ, "file_permission"},
    {"preadv", FL_SC_READ, "file_permission"},
    {"preadv2", FL_SC_READ, "file_permission"},
    {"write", FL_SC_WRITE, "file_permission"},
    {"writev", FL_SC_WRITE, "file_permission"},
    {"pwrite64", FL_SC_WRITE, "file_permission"},
    {"pwritev", FL_SC_WRITE, "file_permission"},
    {"pwritev2", FL_SC_WRITE, "file_permission"},
    {"unlink", FL_SC_UNLINK, "inode_unlink"},
    {"unlinkat", FL_SC_UNLINK, "inode_unlink"},
};

}  // namespace

const char* mechanism_name(SyscallMechanism m) {
  switch (m) {
    case SyscallMechanism::CgroupSockAddr:
      return "cgroup";
    case SyscallMechanism::BpfLsm:
      return "lsm";
    case SyscallMechanism::SeccompNotify:
      return "seccomp";
  }
  return "seccomp";
}

std::string SyscallFaultSpec::describe() const {
  std::string what = errno_name(err) + " on ";
  for (size_t i = 0; i < syscalls.size(); ++i) what += (i ? "," : "") + syscalls[i];
  std::ostringstream pct;
  pct << percent;
  std::string d = what + " at " + pct.str() + "% for " + format_duration(duration_ns);
  if (start_after_ns) d += ", from " + format_duration(start_after_ns) + " in";
  if (after) d += ", after the first " + std::to_string(after) + (after == 1 ? " call" : " calls");
  if (max_injections) d += ", at most " + std::to_string(max_injections) + (max_injections == 1 ? " call" : " calls");
  for (size_t i = 0; i < paths.size(); ++i) d += (i ? " or " : ", under ") + paths[i];
  if (seed) d += ", seed " + std::to_string(*seed);
  return d;
}

nlohmann::json SyscallFaultSpec::brakes_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (after) j["after"] = after;
  if (max_injections) j["max_injections"] = max_injections;
  if (start_after_ns) j["start_after"] = format_duration(start_after_ns);
  return j;
}

bool seeds_honoured(SyscallMechanism m) { return m != SyscallMechanism::BpfLsm; }

LsmCoverage lsm_coverage(const std::vector<std::string>& syscalls) {
  LsmCoverage c;
  for (const auto& s : syscalls) {
    const LsmOp* hit = nullptr;
    for (const auto& o : kLsmOps) {
      if (s == o.syscall) hit = &o;
    }
    if (hit == nullptr) {
      c.missing += (c.missing.empty() ? "" : ",") + s;
      continue;
    }
    if (c.hooks.find(hit->hook) == std::string::npos) c.hooks += (c.hooks.empty() ? "" : ", ") + std::string(hit->hook);
    c.ops |= FL_SC_BIT(hit->op);
  }
  return c;
}

bool is_socket_syscall(const std::string& n) {
  return n == "connect" || n == "socket" || n == "sendmsg" || n == "sendto" || n == "bind";
}

Result<SyscallPlan> plan_syscall_fault(const SyscallFaultSpec& spec) {
  const auto& f = features();
  bool all_socket = std::all_of(spec.syscalls.begin(), spec.syscalls.end(), is_socket_syscall);
  std::string cgroup_why =
      f.set_retval.available && f.cgroup_v2.available
          ? std::string("cgroup socket hooks with bpf_set_retval")
          : "cgroup socket hooks unavailable: " + (f.set_retval.available ? f.cgroup_v2.detail : f.set_retval.detail);
  const LsmCoverage lsm = lsm_coverage(spec.syscalls);
  const bool lsm_serves = f.bpf_lsm.available && lsm.missing.empty() && (spec.command.empty() || f.cgroup_v2.available);
  const std::string lsm_why = "BPF LSM hooks (" + lsm.hooks + "); " + f.lsm_listed.detail;
  // --path: only the seccomp rung reads the path a call names. The cgroup hooks
  // see sockets, and the LSM program does not compare paths (yet): neither may
  // take a --path fault and ignore the prefix.
  if (!spec.paths.empty()) {
    constexpr const char* kLsmNoPath = "the BPF LSM rung does not compare paths";
    if (spec.via == "cgroup")
      return input_error(EINVAL, "--via cgroup cannot take --path: the cgroup socket hooks see no paths");
    if (spec.via == "lsm") return input_error(EINVAL, std::string("--via lsm cannot take --path: ") + kLsmNoPath);
    if (spec.command.empty())
      return input_error(EINVAL,
                         std::string("--path needs a command to wrap (-- COMMAND ARGS): only seccomp user "
                                     "notification reads the paths of calls, and it serves a wrapped command (") +
                             kLsmNoPath + ")");
    if (!f.seccomp_notify.available)
      return make_error(ENOTSUP, "--path: seccomp user notification: " + f.seccomp_notify.detail);
    return SyscallPlan{SyscallMechanism::SeccompNotify,
                       std::string("seccomp user notification for the wrapped command, "
                                   "reading each call's path (--path; BPF LSM passed "
                                   "over: ") +
                           kLsmNoPath + ")"};
  }
  // A given --seed with a real draw (below 100%) needs a rung that can follow
  // it: the kernel rungs are passed over, and refused when forced.
  const bool needs_seed = spec.seed && !spec.seed_drawn && spec.percent < 100;
  const std::string no_seed =
      "--seed: the %s rung draws in the kernel with bpf_get_prandom_u32 and cannot follow a "
      "seed; the cgroup rung (socket syscalls) and seccomp (a wrapped command, --via "
      "seccomp) can replay --percent";
  auto seed_refusal = [&](const char* rung) {
    std::string m = no_seed;
    return input_error(EINVAL, m.replace(m.find("%s"), 2, rung));
  };
  if (spec.via == "cgroup") {
    if (!all_socket) return input_error(EINVAL, "--via cgroup serves only connect, socket, sendmsg, sendto and bind");
    if (!f.set_retval.available || !f.cgroup_v2.available) return make_error(ENOTSUP, "--via cgroup: " + cgroup_why);
    return SyscallPlan{SyscallMechanism::CgroupSockAddr, cgroup_why};
  }
  if (spec.via == "lsm") {
    if (!f.bpf_lsm.available) return make_error(ENOTSUP, "--via lsm: " + f.bpf_lsm.detail);
    if (!lsm.missing.empty()) return make_error(ENOTSUP, "--via lsm: BPF LSM has no hook for " + lsm.missing);
    if (!lsm_serves) return make_error(ENOTSUP, "--via lsm: a command needs a cgroup v2: " + f.cgroup_v2.detail);
    if (needs_seed) return seed_refusal("lsm");
    return SyscallPlan{SyscallMechanism::BpfLsm, lsm_why};
  }
  if (spec.via == "seccomp") {
    if (spec.command.empty()) return input_error(EINVAL, "--via seccomp needs a command to wrap (-- COMMAND ARGS)");
    if (!f.seccomp_notify.available) return make_error(ENOTSUP, "--via seccomp: " + f.seccomp_notify.detail);
    return SyscallPlan{SyscallMechanism::SeccompNotify, "seccomp user notification for the wrapped command (forced)"};
  }
  const bool cgroup_serves = all_socket && f.set_retval.available && f.cgroup_v2.available;
  if (needs_seed && !cgroup_serves && lsm_serves) {
    if (spec.command.empty()) return seed_refusal("lsm");
    if (!f.seccomp_notify.available)
      return make_error(ENOTSUP, "--seed: seccomp user notification: " + f.seccomp_notify.detail);
    return SyscallPlan{SyscallMechanism::SeccompNotify,
                       "seccomp user notification for the wrapped command (--seed: the lsm rung that would serve "
                       "draws without a seed)"};
  }
  if (cgroup_serves) return SyscallPlan{SyscallMechanism::CgroupSockAddr, cgroup_why};
  if (lsm_serves) return SyscallPlan{SyscallMechanism::BpfLsm, lsm_why};
  // The kprobe rung is built but not wired: no kernel we test on can run it.
  std::string ladder = "BPF LSM: " +
                       (!f.bpf_lsm.available   ? f.bpf_lsm.detail
                        : !lsm.missing.empty() ? "no hook for " + lsm.missing
                                               : "a command needs a cgroup v2: " + f.cgroup_v2.detail) +
                       "; kprobe override: " +
                       (f.kprobe_override.available ? std::string("available, but that rung is not wired yet")
                                                    : f.kprobe_override.detail);
  if (!spec.command.empty()) {
    if (!f.seccomp_notify.available)
      return make_error(ENOTSUP, "no mechanism can fail these syscalls here: " + ladder +
                                     "; seccomp user notification: " + f.seccomp_notify.detail);
    return SyscallPlan{SyscallMechanism::SeccompNotify,
                       "seccomp user notification for the wrapped command (" + ladder + ")"};
  }
  std::string which;
  for (const auto& s : spec.syscalls) {
    if (!is_socket_syscall(s)) which += (which.empty() ? "" : ",") + s;
  }
  return make_error(
      ENOTSUP, "cannot fail " + which + " for " + (spec.pid ? "--pid" : "--cgroup") + " on this kernel (" + ladder +
                   "). What works here: the socket syscalls (connect, socket, sendmsg, sendto, bind) for a "
                   "pid or cgroup" +
                   (f.bpf_lsm.available ? std::string(", open/openat/creat, execve, read/write (and their "
                                                      "v/p variants) and unlink/unlinkat through BPF LSM")
                                        : std::string()) +
                   ", or any syscall for a command you wrap: faultctl run syscall ... -- COMMAND");
}

}  // namespace faultline
