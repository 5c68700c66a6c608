// Skeleton lifecycle for syscall_lsm.bpf.c and its LSM attachments.
#include "loader/syscall_lsm_object.h"

#include <bpf/bpf.h>

#include "loader/map_ops.h"
#include "syscall_lsm.skel.h"

namespace faultline {

SyscallLsmObject::SyscallLsmObject(BpfSkeleton<fl_syscall_lsm> skel) : skel_(std::move(skel)) {}
SyscallLsmObject::SyscallLsmObject(SyscallLsmObject&&) noexcept = default;
SyscallLsmObject& SyscallLsmObject::operator=(SyscallLsmObject&&) noexcept = default;

Result<SyscallLsmObject> SyscallLsmObject::load() {
  auto skel = BpfSkeleton<fl_syscall_lsm>::open("syscall_lsm");
  if (!skel) return skel.error();
  FL_TRY(skel->load("the BPF LSM programs"));
  return SyscallLsmObject(std::move(*skel));
}

SyscallLsmObject::~SyscallLsmObject() { links_.clear(); }

Status SyscallLsmObject::attach(uint32_t ops) {
  struct Hook {
    uint32_t ops;
    bpf_program* prog;
  };
  const Hook hooks[] = {
      {FL_SC_BIT(FL_SC_OPEN), skel_->progs.fl_sc_open},
      {FL_SC_BIT(FL_SC_READ) | FL_SC_BIT(FL_SC_WRITE), skel_->progs.fl_sc_perm},
      {FL_SC_BIT(FL_SC_EXEC), skel_->progs.fl_sc_exec},
      {FL_SC_BIT(FL_SC_CONNECT), skel_->progs.fl_sc_connect},
      {FL_SC_BIT(FL_SC_UNLINK), skel_->progs.fl_sc_unlink},
  };
  for (const Hook& h : hooks) {
    if ((ops & h.ops) == 0) continue;
    bpf_link* l = bpf_program__attach_lsm(h.prog);
    if (l == nullptr) {
      int err = errno;
      links_.clear();
      return make_error(err, std::string("cannot attach the LSM program ") + bpf_program__name(h.prog));
    }
    links_.emplace_back(l);
  }
  return {};
}

Status SyscallLsmObject::set_policy(const fl_sc_policy& p) {
  uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.fl_sc_policy), &zero, &p, BPF_ANY) != 0)
    return errno_error("cannot write the syscall fault policy");
  return {};
}

int SyscallLsmObject::policy_fd() const { return bpf_map__fd(skel_->maps.fl_sc_policy); }
int SyscallLsmObject::stats_fd() const { return bpf_map__fd(skel_->maps.fl_sc_stats); }

Result<fl_sc_stats> sum_sc_stats(int stats_fd) {
  auto sum = sum_percpu<fl_sc_stats>(stats_fd, 0, [](fl_sc_stats& t, const fl_sc_stats& s) {
    for (int i = 0; i < FL_SC_OP_MAX; ++i) {
      t.seen[i] += s.seen[i];
      t.injected[i] += s.injected[i];
    }
  });
  if (!sum) return make_error(sum.error().err, "cannot read the syscall fault counters");
  return sum;
}

Result<fl_sc_stats> SyscallLsmObject::stats() const { return sum_sc_stats(stats_fd()); }

}  // namespace faultline
