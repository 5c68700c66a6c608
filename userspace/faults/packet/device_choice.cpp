// Device choice for packet faults: one route lookup per target address.
#include "userspace/faults/packet/device_choice.h"

#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace faultline {
namespace {

std::string device_name(const std::vector<NetDevice>& devs, uint32_t ifindex) {
  for (const auto& d : devs) {
    if (d.ifindex == ifindex) return d.name;
  }
  return "ifindex " + std::to_string(ifindex);
}

}  // namespace

const char* route_type_name(uint8_t t) {
  switch (t) {
    case RTN_UNICAST:
      return "unicast";
    case RTN_LOCAL:
      return "local";
    case RTN_BROADCAST:
      return "broadcast";
    case RTN_ANYCAST:
      return "anycast";
    case RTN_MULTICAST:
      return "multicast";
    case RTN_BLACKHOLE:
      return "blackhole";
    case RTN_UNREACHABLE:
      return "unreachable";
    case RTN_PROHIBIT:
      return "prohibit";
    case RTN_THROW:
      return "throw";
    default:
      return "unknown";
  }
}

bool targets_are_routed(const std::vector<Prefix>& targets) {
  if (targets.empty()) return false;
  // A /0 (0.0.0.0/0 is /96 in the mapped form) covers every address.
  return std::none_of(targets.begin(), targets.end(),
                      [](const Prefix& p) { return p.plen == 0 || (p.v4 && p.plen == 96); });
}

Result<std::vector<TargetRoute>> route_targets(const std::vector<Prefix>& targets, const std::string& netns_display) {
  auto lookup = RouteLookup::open();
  if (!lookup) return lookup.error();
  std::vector<TargetRoute> out;
  out.reserve(targets.size());
  for (const auto& t : targets) {
    std::array<uint8_t, 16> addr{};
    int family = AF_INET6;
    if (t.v4) {
      family = AF_INET;
      std::memcpy(addr.data(), reinterpret_cast<const uint8_t*>(&t.addr) + 12, 4);
    } else {
      std::memcpy(addr.data(), &t.addr, 16);
    }
    auto r = lookup->get(family, addr);
    if (!r) {
      std::string what = t.exact() ? "" : " (looked up by its network address " + addr_text(t.addr) + ")";
      return input_error(r.error().err, "--target " + t.str() + ": no route to it in netns " + netns_display + what +
                                            ", so no packet for it can be faulted");
    }
    out.push_back({t, *r});
  }
  return out;
}

Result<std::vector<NetDevice>> devices_for_routes(const std::vector<NetDevice>& devs,
                                                  const std::vector<TargetRoute>& routes) {
  std::map<uint32_t, NetDevice> chosen;
  for (const auto& r : routes) {
    const std::string t = "--target " + r.target.str();
    switch (r.route.type) {
      case RTN_UNICAST:
      case RTN_LOCAL:
      case RTN_BROADCAST:
      case RTN_ANYCAST:
      case RTN_MULTICAST:
        break;
      default:
        return input_error(EHOSTUNREACH, t + ": no route carries packets to it (its route is of type " +
                                             route_type_name(r.route.type) + "), so no packet for it can be faulted");
    }
    auto d = std::find_if(devs.begin(), devs.end(), [&](const NetDevice& x) { return x.ifindex == r.route.oif; });
    if (r.route.oif == 0 || d == devs.end())
      return input_error(ENODEV, t + ": its route leaves through " + device_name(devs, r.route.oif) +
                                     ", which is not a device of this namespace");
    if (!d->ethernet && !d->loopback)
      return input_error(ENOTSUP, t + ": its route leaves through " + d->name +
                                      ", which is not an Ethernet device; the packet parser expects Ethernet framing");
    chosen.emplace(d->ifindex, *d);
  }
  std::vector<NetDevice> out;
  for (auto& [ifindex, d] : chosen) out.push_back(std::move(d));
  return out;
}

nlohmann::json routes_json(const std::vector<TargetRoute>& routes, const std::vector<NetDevice>& devs, size_t limit) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < routes.size() && i < limit; ++i) {
    a.push_back({{"target", routes[i].target.str()},
                 {"dev", device_name(devs, routes[i].route.oif)},
                 {"type", route_type_name(routes[i].route.type)}});
  }
  return a;
}

}  // namespace faultline
