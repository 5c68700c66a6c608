// The device choice of packet faults: routes in, devices out (no kernel needed),
// and the rule for which targets are looked up at all.
#include "userspace/faults/packet/device_choice.h"

#include <gtest/gtest.h>
#include <linux/rtnetlink.h>

namespace faultline {
namespace {

const std::vector<NetDevice> kDevs = {
    {"lo", 1, true, false},   {"eth0", 2, false, true}, {"ifb0", 3, false, true},
    {"eth1", 4, false, true}, {"wg0", 5, false, false},
};

Prefix prefix(const std::string& s) {
  auto p = parse_prefix(s);
  if (!p) ADD_FAILURE() << s << ": " << p.error().message;
  return p.value_or(Prefix{});
}

TargetRoute route(const std::string& target, uint32_t oif, uint8_t type) { return {prefix(target), {oif, type}}; }

std::vector<std::string> names(const std::vector<NetDevice>& devs) {
  std::vector<std::string> out;
  for (const auto& d : devs) out.push_back(d.name);
  return out;
}

TEST(DeviceChoice, LocalAddressesGoToLoOnly) {
  auto d = devices_for_routes(kDevs, {route("127.0.0.1", 1, RTN_LOCAL), route("::1", 1, RTN_LOCAL)});
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(names(*d), std::vector<std::string>{"lo"}) << "never ifb0 or any other device no packet to us passes";
}

TEST(DeviceChoice, EachRoutedDeviceOnceInIfindexOrder) {
  auto d = devices_for_routes(kDevs, {route("10.9.0.0/16", 4, RTN_UNICAST), route("10.0.0.2", 2, RTN_UNICAST),
                                      route("10.0.0.3", 2, RTN_UNICAST), route("192.168.1.5", 1, RTN_LOCAL)});
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(names(*d), (std::vector<std::string>{"lo", "eth0", "eth1"}));
}

TEST(DeviceChoice, RoutesThatCarryNoPacketAreBadInputNamingTheTarget) {
  for (uint8_t type : {uint8_t{RTN_BLACKHOLE}, uint8_t{RTN_UNREACHABLE}, uint8_t{RTN_PROHIBIT}}) {
    auto d = devices_for_routes(kDevs, {route("10.0.0.2", 2, RTN_UNICAST), route("203.0.113.7", 2, type)});
    ASSERT_FALSE(d.ok()) << route_type_name(type);
    EXPECT_TRUE(d.error().bad_input);
    EXPECT_NE(d.error().message.find("--target 203.0.113.7"), std::string::npos) << d.error().message;
    EXPECT_NE(d.error().message.find(route_type_name(type)), std::string::npos) << d.error().message;
  }
}

TEST(DeviceChoice, ADeviceThatIsNotThereOrNotEthernetIsBadInput) {
  auto gone = devices_for_routes(kDevs, {route("10.0.0.2", 42, RTN_UNICAST)});
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(gone.error().bad_input);
  EXPECT_NE(gone.error().message.find("ifindex 42"), std::string::npos) << gone.error().message;
  auto tunnel = devices_for_routes(kDevs, {route("fd00::7", 5, RTN_UNICAST)});
  ASSERT_FALSE(tunnel.ok());
  EXPECT_TRUE(tunnel.error().bad_input);
  EXPECT_NE(tunnel.error().message.find("--target fd00::7"), std::string::npos) << tunnel.error().message;
  EXPECT_NE(tunnel.error().message.find("wg0"), std::string::npos) << tunnel.error().message;
}

TEST(DeviceChoice, WhichTargetsAreLookedUp) {
  EXPECT_FALSE(targets_are_routed({})) << "no target (--source, --cgroup, --force): today's every-device choice";
  EXPECT_TRUE(targets_are_routed({prefix("127.0.0.1"), prefix("10.0.0.0/8"), prefix("fd00::/64")}));
  EXPECT_FALSE(targets_are_routed({prefix("10.0.0.2"), prefix("0.0.0.0/0")})) << "a /0 covers every device";
  EXPECT_FALSE(targets_are_routed({prefix("::/0")}));
}

TEST(DeviceChoice, PlanRowsNameDeviceAndType) {
  std::vector<NetDevice> lo = {kDevs[0]};
  auto j = routes_json({route("127.0.0.1", 1, RTN_LOCAL), route("::1", 1, RTN_LOCAL)}, lo, 1);
  ASSERT_EQ(j.size(), 1u) << j.dump();
  EXPECT_EQ(j[0]["target"], "127.0.0.1");
  EXPECT_EQ(j[0]["dev"], "lo");
  EXPECT_EQ(j[0]["type"], "local");
}

}  // namespace
}  // namespace faultline
