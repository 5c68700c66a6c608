// Skeleton lifecycle for syscall_override.bpf.c.
#include "loader/syscall_override_object.h"

#include <bpf/bpf.h>

#include "syscall_override.skel.h"

namespace faultline {

void SyscallOverrideObject::Destroy::operator()(fl_syscall_ovr* s) const { fl_syscall_ovr__destroy(s); }

Result<SyscallOverrideObject> SyscallOverrideObject::load() {
  fl_syscall_ovr* skel = fl_syscall_ovr__open();
  if (skel == nullptr) return errno_error("cannot open the syscall_override BPF object");
  SyscallOverrideObject obj(skel);
  if (int err = fl_syscall_ovr__load(skel); err != 0)
    return make_error(err, "cannot load the kprobe override program");
  return obj;
}

SyscallOverrideObject::~SyscallOverrideObject() { links_.clear(); }

Status SyscallOverrideObject::attach(const std::vector<std::string>& syscalls) {
  for (const auto& name : syscalls) {
    bpf_link* l = bpf_program__attach_ksyscall(skel_->progs.fl_sc_override, name.c_str(), nullptr);
    if (l == nullptr) {
      int err = errno;
      links_.clear();
      return make_error(err, "cannot attach the kprobe override to " + name);
    }
    links_.emplace_back(l);
  }
  return {};
}

Status SyscallOverrideObject::set_policy(const fl_sc_policy& p) {
  uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.fl_sc_policy), &zero, &p, BPF_ANY) != 0)
    return errno_error("cannot write the syscall fault policy");
  return {};
}

}  // namespace faultline
