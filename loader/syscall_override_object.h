// The syscall_override BPF object (kprobe + bpf_override_return). Built on every
// kernel; it loads only where CONFIG_BPF_KPROBE_OVERRIDE is set, which no kernel
// in the test matrix has (see docs/kernel-support.md), so `faultctl run syscall`
// does not choose it yet; the feature probe loads it to say whether it could.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "faultline/syscall_abi.h"
#include "loader/bpf_link.h"
#include "loader/bpf_skeleton.h"

struct fl_syscall_ovr;  // the bpftool skeleton

namespace faultline {

class SyscallOverrideObject {
 public:
  [[nodiscard]] static Result<SyscallOverrideObject> load();
  SyscallOverrideObject(SyscallOverrideObject&&) noexcept;
  SyscallOverrideObject& operator=(SyscallOverrideObject&&) noexcept;
  ~SyscallOverrideObject();

  // One kprobe per syscall name ("openat"), on its entry function.
  [[nodiscard]] Status attach(const std::vector<std::string>& syscalls);
  [[nodiscard]] Status set_policy(const fl_sc_policy& p);

 private:
  explicit SyscallOverrideObject(BpfSkeleton<fl_syscall_ovr> skel);
  BpfSkeleton<fl_syscall_ovr> skel_;
  std::vector<BpfLink> links_;
};

}  // namespace faultline
