// Skeleton lifecycle for syscall_override.bpf.c.
#include "loader/syscall_override_object.h"

#include <bpf/bpf.h>

#include "syscall_override.skel.h"

namespace faultline {

SyscallOverrideObject::SyscallOverrideObject(BpfSkeleton<fl_syscall_ovr> skel) : skel_(std::move(skel)) {}
SyscallOverrideObject::SyscallOverrideObject(SyscallOverrideObject&&) noexcept = default;
SyscallOverrideObject& SyscallOverrideObject::operator=(SyscallOverrideObject&&) noexcept = default;

Result<SyscallOverrideObject> SyscallOverrideObject::load() {
  auto skel = BpfSkeleton<fl_syscall_ovr>::open("syscall_override");
  if (!skel) return skel.error();
  // The feature probe quotes this error in `faultctl features`: no verifier-log hint.
  if (auto st = skel->load(); !st) return make_error(st.error().err, "cannot load the kprobe override program");
  return SyscallOverrideObject(std::move(*skel));
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
