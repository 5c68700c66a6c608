// Which devices a packet fault attaches to: the ones its targets' routes leave
// through (lo for this host's own addresses), so no program sits where no packet
// for the target can pass.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "loader/netns.h"
#include "loader/rtnetlink.h"
#include "userspace/net/address.h"

namespace faultline {

// Where the kernel routes one target (an exact address, or a prefix by its
// network address).
struct TargetRoute {
  Prefix target;
  RouteAnswer route;
};

// Whether the targets are looked up in the routing table at all: not without a
// target (a fault scoped by --source or --cgroup, or --force), and not when a
// target is a /0 (every address: every device could carry it).
[[nodiscard]] bool targets_are_routed(const std::vector<Prefix>& targets);

// Asks the routing table of the calling thread's namespace where each target
// goes. A target without a route is bad input,
// named with the kernel's reason.
[[nodiscard]] Result<std::vector<TargetRoute>> route_targets(const std::vector<Prefix>& targets,
                                                             const std::string& netns_display);

// The devices the routes lead to, in ifindex order, each once. Pure: a route
// of a kind that carries no packet (unreachable, blackhole, prohibit), one to a
// device not in `devs`, or one through a device whose framing the parser cannot
// read is bad input naming the target.
[[nodiscard]] Result<std::vector<NetDevice>> devices_for_routes(const std::vector<NetDevice>& devs,
                                                                const std::vector<TargetRoute>& routes);

// "local", "unicast", ... for the plan and the docs.
[[nodiscard]] const char* route_type_name(uint8_t rtn_type);

// At most `limit` rows of {"target", "dev", "type"} for the plan.
[[nodiscard]] nlohmann::json routes_json(const std::vector<TargetRoute>& routes, const std::vector<NetDevice>& devs,
                                         size_t limit = 8);

}  // namespace faultline
