// What the running kernel can do, found by loading and attaching tiny programs.
#pragma once

#include <string>

namespace faultline {

struct FeatureProbe {
  bool available = false;
  std::string detail;  // why not, or how it was confirmed
};

struct Features {
  FeatureProbe bpf_syscall;       // can we load BPF at all
  FeatureProbe tcx;               // TCX links (BPF_TCX_INGRESS/EGRESS)
  FeatureProbe clsact;            // tc clsact + cls_bpf
  FeatureProbe bpf_loop;          // bpf_loop helper (the DNS parser needs it)
  FeatureProbe sch_fq;            // fq qdisc, for EDT delay and rate
  FeatureProbe cgroup_v2;         // a cgroup2 mount
  FeatureProbe set_retval;        // bpf_set_retval from cgroup programs
  FeatureProbe ringbuf;           // BPF ring buffer
  FeatureProbe lsm_listed;        // "bpf" in /sys/kernel/security/lsm
  FeatureProbe bpf_lsm;           // an LSM program loads and attaches
  FeatureProbe fentry;            // trampolines (fentry/fexit/fmod_ret)
  FeatureProbe kprobe_override;   // kprobe + bpf_override_return
  FeatureProbe seccomp_notify;    // seccomp user notification
  FeatureProbe fanotify_perm;     // fanotify permission events
  FeatureProbe io_uring;          // io_uring_setup
  FeatureProbe skb_task_helpers;  // pid and comm helpers in cgroup_skb programs

  std::string cgroup_v2_mount;  // where cgroup2 is mounted, if anywhere
};

// Probes once per process; later calls return the cached value. As root, the
// probes of this boot are read from the state folder's cache when a process of
// the same binary made them (loader/feature_cache.h), and written there when not.
[[nodiscard]] const Features& features();

// The next features() or packet_features() of this process probes the kernel
// even when the cache has this boot's answer, and rewrites the cache:
// `faultctl features` does, so it always tells what the kernel says now.
void probe_features_afresh();

// Only what packet faults need (TCX, clsact, bpf_loop, sch_fq, cgroup v2): the
// full probe parses kernel BTF and loads a dozen programs, too slow for every
// `faultctl run`. The other fields are left unprobed (unavailable, "not probed").
[[nodiscard]] const Features& packet_features();

// Whether cgroup_skb programs may call bpf_get_current_pid_tgid and
// bpf_get_current_comm; where they may not (6.1 among others), the sockaddr
// object loads its packet programs without their process filter. Probed once,
// alone: loading that object needs no other probe.
[[nodiscard]] const FeatureProbe& skb_task_helpers();

}  // namespace faultline
