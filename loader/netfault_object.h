// The netfault BPF object: one loaded instance per network namespace, maps shared by pin.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "faultline/abi.h"
#include "loader/bpf_skeleton.h"
#include "loader/bpffs.h"

struct netfault;  // the bpftool skeleton

namespace faultline {

class NetfaultObject {
 public:
  // Opens the skeleton, sets the per-namespace constants, loads it. Maps are
  // reused from `layout` if pinned there, else created and pinned.
  // `dirs` (FL_DIR_* bits) says which programs to load: each costs a verifier
  // pass, and 0 loads none (just creates or reuses the pinned maps).
  [[nodiscard]] static Result<NetfaultObject> load(const BpffsLayout& layout, uint32_t netns_ino, uint32_t egress_drop,
                                                   uint8_t dirs = 3);
  NetfaultObject(NetfaultObject&&) noexcept;
  NetfaultObject& operator=(NetfaultObject&&) noexcept;
  ~NetfaultObject();

  [[nodiscard]] int egress_fd() const;
  [[nodiscard]] int ingress_fd() const;
  [[nodiscard]] netfault* skeleton() const { return skel_.get(); }

 private:
  explicit NetfaultObject(BpfSkeleton<netfault> skel);
  BpfSkeleton<netfault> skel_;
};

}  // namespace faultline
