// Network namespaces: naming one, entering it for a moment, listing its devices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

struct NetnsRef {
  std::string path;     // an nsfs file: /run/netns/NAME, /proc/N/ns/net, ...
  std::string display;  // what the operator wrote, or "host"
  uint32_t inode = 0;   // identifies the namespace in fault entries
};

// NAME (under /run/netns), an absolute PATH, pid:N, or empty for our own namespace.
[[nodiscard]] Result<NetnsRef> resolve_netns(const std::string& spec);

// While alive, the calling thread is inside the namespace; it returns on destruction.
class NetnsEnter {
 public:
  [[nodiscard]] static Result<NetnsEnter> enter(const NetnsRef& ns);
  NetnsEnter(NetnsEnter&&) noexcept = default;
  NetnsEnter& operator=(NetnsEnter&&) = delete;
  NetnsEnter(const NetnsEnter&) = delete;
  ~NetnsEnter();

 private:
  explicit NetnsEnter(UniqueFd home) : home_(std::move(home)) {}
  UniqueFd home_;
};

struct NetDevice {
  std::string name;
  uint32_t ifindex = 0;
  bool loopback = false;
  bool ethernet = false;  // ARPHRD_ETHER: our parser expects an Ethernet header
};

// The devices of the calling thread's current namespace.
[[nodiscard]] Result<std::vector<NetDevice>> list_devices();

}  // namespace faultline
