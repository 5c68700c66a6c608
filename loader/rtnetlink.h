// The few rtnetlink operations Faultline needs: the root qdisc (fq for EDT
// delay), and counting tc filters (a clsact we created goes with its last one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"

namespace faultline {

struct QdiscInfo {
  std::string kind;     // "fq", "noqueue", "pfifo_fast", ...
  uint32_t handle = 0;  // 0 for a default qdisc the kernel attached by itself
};

// The root qdisc of a device in the calling thread's namespace, if any.
[[nodiscard]] Result<std::optional<QdiscInfo>> root_qdisc(uint32_t ifindex);

// Makes `kind` the root qdisc of the device (replacing a kernel default).
[[nodiscard]] Status replace_root_qdisc(uint32_t ifindex, const std::string& kind);

// Deletes the root qdisc; the kernel then restores its default.
[[nodiscard]] Status delete_root_qdisc(uint32_t ifindex);

// How many tc filters hang under `parent` (e.g. clsact ingress) of a device.
[[nodiscard]] Result<int> count_filters(uint32_t ifindex, uint32_t parent);

}  // namespace faultline
