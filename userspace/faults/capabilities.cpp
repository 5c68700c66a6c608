// The ladders of docs/kernel-support.md, climbed with the probe results.
#include "userspace/faults/capabilities.h"

namespace faultline {

std::vector<Capability> capabilities(const Features& f) {
  std::vector<Capability> caps;
  {
    Capability c{"packet faults", {"tcx", "tc clsact + cls_bpf"}, "", ""};
    if (!f.bpf_loop.available) {
      c.why = "the packet program needs the bpf_loop helper (kernel 5.17+): " + f.bpf_loop.detail;
    } else if (f.tcx.available) {
      c.chosen = "tcx";
      c.why = f.tcx.detail;
    } else if (f.clsact.available) {
      c.chosen = "tc clsact + cls_bpf";
      c.why = "no TCX: " + f.tcx.detail;
    } else {
      c.why = "neither TCX (" + f.tcx.detail + ") nor clsact (" + f.clsact.detail + ")";
    }
    caps.push_back(c);
  }
  {
    Capability c{"delay, jitter, rate", {"EDT + sch_fq", "TCP-stream delay in the proxy"}, "", ""};
    if (f.sch_fq.available && !caps[0].chosen.empty()) {
      c.chosen = "EDT + sch_fq";
      c.why = f.sch_fq.detail;
    } else if (f.cgroup_v2.available) {
      c.chosen = c.ladder[1];
      c.why = "sch_fq is missing (" + f.sch_fq.detail +
              "): latency and bandwidth run through the proxy (--via proxy; TCP only, per stream)";
    } else {
      c.why = "sch_fq is missing (" + f.sch_fq.detail + "), and the proxy's redirect needs cgroup v2 (" +
              f.cgroup_v2.detail + ")";
    }
    caps.push_back(c);
  }
  {
    Capability c{"connect/socket errno", {"cgroup sock_addr + bpf_set_retval"}, "", ""};
    if (f.set_retval.available && f.cgroup_v2.available) {
      c.chosen = c.ladder[0];
      c.why = f.set_retval.detail + "; " + f.cgroup_v2.detail;
    } else {
      c.why = !f.cgroup_v2.available ? f.cgroup_v2.detail : f.set_retval.detail;
    }
    caps.push_back(c);
  }
  {
    // The kprobe override program is built and probed, but no kernel in the test
    // matrix can run it (docs/kernel-support.md), so it is never chosen yet.
    Capability c{"any-syscall errno", {"kprobe override", "BPF LSM", "seccomp user-notify (wrapped command)"}, "", ""};
    std::string lsm = "BPF LSM: " + f.bpf_lsm.detail;
    std::string kp = f.kprobe_override.available
                         ? "kprobe override: the kernel has it, but the rung is not wired (no kernel to validate it on)"
                         : "kprobe override: " + f.kprobe_override.detail;
    if (f.bpf_lsm.available) {
      c.chosen = c.ladder[1];
      c.why = kp + "; " + lsm +
              "; serves open, exec, connect, read, write and unlink for a pid, a cgroup or a command; other syscalls "
              "fall back to seccomp user-notify for a wrapped command";
    } else if (f.seccomp_notify.available) {
      c.chosen = c.ladder[2];
      c.why = kp + "; " + lsm + "; works only for a command faultctl starts";
    } else {
      c.why = kp + "; " + lsm + "; seccomp: " + f.seccomp_notify.detail;
    }
    caps.push_back(c);
  }
  {
    // --path reads the path each call names; only the seccomp supervisor does.
    Capability c{"syscall errno by path (--path)", {"BPF LSM", "seccomp user-notify (wrapped command)"}, "", ""};
    const std::string lsm = "BPF LSM: the rung does not compare paths";
    if (f.seccomp_notify.available) {
      c.chosen = c.ladder[1];
      c.why = lsm + "; seccomp reads each call's path from the command's memory, for a command faultctl starts";
    } else {
      c.why = lsm + "; seccomp: " + f.seccomp_notify.detail;
    }
    caps.push_back(c);
  }
  {
    // faultctl guard --enforce-fs. The BPF LSM rung (file_open and
    // bprm_check_security scoped to the guard's cgroup) is not built yet.
    Capability c{"file/exec enforcement", {"BPF LSM", "fanotify permission events"}, "", ""};
    const std::string lsm = std::string("BPF LSM: the rung is not built yet (the kernel offers it: ") +
                            (f.bpf_lsm.available ? "yes" : "no, " + f.bpf_lsm.detail) + ")";
    if (f.fanotify_perm.available) {
      c.chosen = c.ladder[1];
      c.why = lsm + "; fanotify_perm: " + f.fanotify_perm.detail +
              "; for a command faultctl guard starts (root), on the mounts of its own mount namespace";
    } else {
      c.why = lsm + "; fanotify_perm: " + f.fanotify_perm.detail;
    }
    caps.push_back(c);
  }
  return caps;
}

}  // namespace faultline
