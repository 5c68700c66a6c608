// The syscall_override BPF object (kprobe + bpf_override_return). Built on every
// kernel; it loads only where CONFIG_BPF_KPROBE_OVERRIDE is set, which no kernel
// in the test matrix has (see docs/kernel-support.md), so `faultctl run syscall`
// does not choose it yet; the feature probe loads it to say whether it could.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "faultline/syscall_abi.h"
#include "loader/bpf_link.h"
#include "base/result.h"

struct fl_syscall_ovr;  // the bpftool skeleton

namespace faultline {

class SyscallOverrideObject {
 public:
  [[nodiscard]] static Result<SyscallOverrideObject> load();
  SyscallOverrideObject(SyscallOverrideObject&&) noexcept = default;
  SyscallOverrideObject& operator=(SyscallOverrideObject&&) noexcept = default;
  ~SyscallOverrideObject();

  // One kprobe per syscall name ("openat"), on its entry function.
  [[nodiscard]] Status attach(const std::vector<std::string>& syscalls);
  [[nodiscard]] Status set_policy(const fl_sc_policy& p);

 private:
  struct Destroy {
    void operator()(fl_syscall_ovr* s) const;
  };
  explicit SyscallOverrideObject(fl_syscall_ovr* s) : skel_(s) {}
  std::unique_ptr<fl_syscall_ovr, Destroy> skel_;
  std::vector<BpfLink> links_;
};

}  // namespace faultline
