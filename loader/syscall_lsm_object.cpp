// Skeleton lifecycle for syscall_lsm.bpf.c and its LSM attachments.
#include "loader/syscall_lsm_object.h"

#include <bpf/bpf.h>

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

Result<fl_sc_stats> SyscallLsmObject::stats() const {
  std::vector<fl_sc_stats> per(static_cast<size_t>(libbpf_num_possible_cpus()));
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.fl_sc_stats), &zero, per.data()) != 0)
    return errno_error("cannot read the syscall fault counters");
  fl_sc_stats sum{};
  for (const auto& s : per) {
    for (int i = 0; i < FL_SC_OP_MAX; ++i) {
      sum.seen[i] += s.seen[i];
      sum.injected[i] += s.injected[i];
    }
  }
  return sum;
}

}  // namespace faultline
