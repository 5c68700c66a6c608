// Skeleton lifecycle: open, set rodata, load (reusing pinned maps), destroy.
#include "loader/netfault_object.h"

#include <bpf/libbpf.h>

#include "netfault.skel.h"

namespace faultline {

NetfaultObject::NetfaultObject(BpfSkeleton<netfault> skel) : skel_(std::move(skel)) {}
NetfaultObject::NetfaultObject(NetfaultObject&&) noexcept = default;
NetfaultObject& NetfaultObject::operator=(NetfaultObject&&) noexcept = default;
NetfaultObject::~NetfaultObject() = default;

Result<NetfaultObject> NetfaultObject::load(const BpffsLayout& layout, uint32_t netns_ino, uint32_t egress_drop,
                                            uint8_t dirs) {
  std::string pin_root = layout.maps();
  LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = pin_root.c_str());
  auto opened = BpfSkeleton<netfault>::open("netfault", &opts);
  if (!opened) return opened.error();
  BpfSkeleton<netfault>& skel = *opened;
  skel->rodata->fl_netns_ino = netns_ino;
  skel->rodata->fl_egress_drop = egress_drop;
  bpf_program__set_autoload(skel->progs.fl_egress, (dirs & FL_DIR_EGRESS) != 0);
  bpf_program__set_autoload(skel->progs.fl_ingress, (dirs & FL_DIR_INGRESS) != 0);
  FL_TRY(skel.load("the netfault BPF programs"));
  return NetfaultObject(std::move(skel));
}

int NetfaultObject::egress_fd() const { return bpf_program__fd(skel_->progs.fl_egress); }
int NetfaultObject::ingress_fd() const { return bpf_program__fd(skel_->progs.fl_ingress); }

}  // namespace faultline
