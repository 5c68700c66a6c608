// The syscall_lsm BPF object: one private instance per `faultctl run syscall`,
// never pinned, so its LSM hooks detach when the owning process exits. The
// fault also ends in the kernel at its expiry (CLOCK_BOOTTIME) without us.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "faultline/syscall_abi.h"
#include "loader/bpf_link.h"
#include "loader/bpf_skeleton.h"

struct fl_syscall_lsm;  // the bpftool skeleton

namespace faultline {

// The counters of a syscall_lsm instance (its fl_sc_stats map, by fd), summed over CPUs.
[[nodiscard]] Result<fl_sc_stats> sum_sc_stats(int stats_fd);

class SyscallLsmObject {
 public:
  [[nodiscard]] static Result<SyscallLsmObject> load();
  SyscallLsmObject(SyscallLsmObject&&) noexcept;
  SyscallLsmObject& operator=(SyscallLsmObject&&) noexcept;
  ~SyscallLsmObject();

  // Attaches the hooks the operations in ops (FL_SC_BIT set) need, and no
  // others: file_permission runs on every read and write of the host.
  [[nodiscard]] Status attach(uint32_t ops);
  void detach() { links_.clear(); }

  [[nodiscard]] Status set_policy(const fl_sc_policy& p);
  // Counters summed over CPUs.
  [[nodiscard]] Result<fl_sc_stats> stats() const;
  [[nodiscard]] int policy_fd() const;
  [[nodiscard]] int stats_fd() const;

 private:
  explicit SyscallLsmObject(BpfSkeleton<fl_syscall_lsm> skel);
  BpfSkeleton<fl_syscall_lsm> skel_;
  std::vector<BpfLink> links_;
};

}  // namespace faultline
