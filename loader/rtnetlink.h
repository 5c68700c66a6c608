// The few rtnetlink operations Faultline needs: the root qdisc (fq for EDT
// delay), counting tc filters (a clsact we created goes with its last one), and
// the route a packet to an address takes (which device a fault attaches to).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

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

// The route the kernel picks for a packet to one address (RTM_GETROUTE, as
// `ip route get` asks): the output device and the route type (RTN_UNICAST,
// RTN_LOCAL for an address of this host, which leaves through lo, ...).
struct RouteAnswer {
  uint32_t oif = 0;
  uint8_t type = 0;  // RTN_*
};

// One rtnetlink socket for many lookups, opened in the calling thread's
// namespace (a socket keeps the namespace it was made in).
class RouteLookup {
 public:
  [[nodiscard]] static Result<RouteLookup> open();
  // family is AF_INET (the first 4 bytes of addr) or AF_INET6. No route is an
  // error carrying the kernel's errno (ENETUNREACH, EHOSTUNREACH, ...).
  [[nodiscard]] Result<RouteAnswer> get(int family, const std::array<uint8_t, 16>& addr);

 private:
  explicit RouteLookup(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
  uint32_t seq_ = 0;
};

}  // namespace faultline
