// Skeleton lifecycle: open, set rodata, load (reusing pinned maps), destroy.
#include "loader/netfault_object.h"

#include <bpf/libbpf.h>

#include "netfault.skel.h"

namespace faultline {

void NetfaultObject::Destroy::operator()(netfault* s) const { netfault__destroy(s); }

Result<NetfaultObject> NetfaultObject::load(const BpffsLayout& layout, uint32_t netns_ino,
                                            uint32_t egress_drop, uint8_t dirs) {
  std::string pin_root = layout.maps();
  LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = pin_root.c_str());
  netfault* skel = netfault__open_opts(&opts);
  if (skel == nullptr) return errno_error("cannot open the netfault BPF object");
  NetfaultObject obj(skel);
  skel->rodata->fl_netns_ino = netns_ino;
  skel->rodata->fl_egress_drop = egress_drop;
  bpf_program__set_autoload(skel->progs.fl_egress, (dirs & FL_DIR_EGRESS) != 0);
  bpf_program__set_autoload(skel->progs.fl_ingress, (dirs & FL_DIR_INGRESS) != 0);
  if (int err = netfault__load(skel); err != 0)
    return make_error(err, "cannot load the netfault BPF programs (set FAULTLINE_LIBBPF_LOG=1 for the verifier log)");
  return obj;
}

NetfaultObject::~NetfaultObject() = default;

int NetfaultObject::egress_fd() const { return bpf_program__fd(skel_->progs.fl_egress); }
int NetfaultObject::ingress_fd() const { return bpf_program__fd(skel_->progs.fl_ingress); }

}  // namespace faultline
