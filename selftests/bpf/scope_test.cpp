// Which packets a fault applies to: addresses, prefixes, source, ports, protocol,
// direction, device, namespace, cgroup, and which fault wins when several could.
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <fstream>

#include "selftests/bpf/netfault_fixture.h"

namespace faultline::bpftest {
namespace {

class ScopeTest : public NetfaultTest {};

TEST_F(ScopeTest, Ipv4ExactTargetHitsThatAddressOnly) {
  add(make_spec(FaultKind::Partition, {"192.0.2.1"}));
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect);
  for (const char* a : {"192.0.2.0", "192.0.2.2", "192.0.3.1", "10.0.0.1"})
    EXPECT_EQ(egress(udp_to(a)), Verdict::Pass) << "only 192.0.2.1 is the target, not " << a;
}

TEST_F(ScopeTest, Ipv4CidrCoversItsRangeAndNothingElse) {
  add(make_spec(FaultKind::Partition, {"192.0.2.128/25"}));
  for (const char* a : {"192.0.2.128", "192.0.2.200", "192.0.2.255"})
    EXPECT_EQ(egress(udp_to(a)), Verdict::Redirect) << a << " lies inside 192.0.2.128/25";
  for (const char* a : {"192.0.2.127", "192.0.2.0", "192.0.3.128", "192.0.1.255"})
    EXPECT_EQ(egress(udp_to(a)), Verdict::Pass) << a << " lies outside 192.0.2.128/25";
}

TEST_F(ScopeTest, Ipv6ExactAndCidrTargets) {
  add(make_spec(FaultKind::Partition, {"2001:db8:a::1", "2001:db8:b::/48"}));
  for (const char* a : {"2001:db8:a::1", "2001:db8:b::", "2001:db8:b:ffff:ffff:ffff:ffff:ffff", "2001:db8:b:1::9"})
    EXPECT_EQ(egress(udp_to(a)), Verdict::Redirect) << a;
  for (const char* a : {"2001:db8:a::2", "2001:db8:a::", "2001:db8:c::", "2001:db8:a:0:0:0:0:100"})
    EXPECT_EQ(egress(udp_to(a)), Verdict::Pass) << a;
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Pass) << "an IPv6 fault leaves IPv4";
}

TEST_F(ScopeTest, Ipv4PrefixLeavesIpv6AndNoTargetHitsBoth) {
  add(make_spec(FaultKind::Partition, {"0.0.0.0/0"}));
  EXPECT_EQ(egress(udp_to("203.0.113.9")), Verdict::Redirect) << "0.0.0.0/0 covers every IPv4 address";
  EXPECT_EQ(egress(udp_to("2001:db8::9")), Verdict::Pass) << "0.0.0.0/0 is ::ffff:0:0/96, no native IPv6";

  FaultSpec every = make_spec(FaultKind::Partition);  // no --target (--force): ::/0
  every.dir_mask = FL_DIR_INGRESS;
  add(every);
  EXPECT_EQ(ingress(udp_from("203.0.113.9")), Verdict::Shot);
  EXPECT_EQ(ingress(udp_from("2001:db8::9")), Verdict::Shot);
  Packet arp = PacketBuilder(kLocal4, "203.0.113.9").udp(1, 2).ethertype(0x0806).build();
  EXPECT_EQ(ingress(arp), Verdict::Pass) << "a frame that is not IP is never touched";
}

TEST_F(ScopeTest, SourcePrefixMatchesTheLocalAddressInEachDirection) {
  FaultSpec s = make_spec(FaultKind::Partition, {"192.0.2.1", "2001:db8:a::1"});
  s.source = prefix("198.51.100.0/24");
  s.dir_mask = FL_DIR_EGRESS | FL_DIR_INGRESS;
  add(s);
  auto out = [](const char* src) { return PacketBuilder(src, "192.0.2.1").udp(40000, 80).build(); };
  auto in = [](const char* dst) { return PacketBuilder("192.0.2.1", dst).udp(80, 40000).build(); };
  EXPECT_EQ(egress(out("198.51.100.7")), Verdict::Redirect) << "egress: the source address is ours";
  EXPECT_EQ(egress(out("198.51.100.255")), Verdict::Redirect);
  EXPECT_EQ(egress(out("198.51.101.7")), Verdict::Pass) << "egress from outside --source";
  EXPECT_EQ(ingress(in("198.51.100.7")), Verdict::Shot) << "ingress: the destination address is ours";
  EXPECT_EQ(ingress(in("203.0.113.7")), Verdict::Pass) << "ingress to outside --source";

  FaultSpec s6 = make_spec(FaultKind::Partition, {"2001:db8:a::2"});
  s6.source = prefix("2001:db8:100::/64");
  add(s6);
  EXPECT_EQ(egress(PacketBuilder("2001:db8:100::7", "2001:db8:a::2").udp(1, 2).build()), Verdict::Redirect);
  EXPECT_EQ(egress(PacketBuilder("2001:db8:101::7", "2001:db8:a::2").udp(1, 2).build()), Verdict::Pass);
}

TEST_F(ScopeTest, SinglePortAndPortRangeMatchTheRemotePort) {
  FaultSpec one = make_spec(FaultKind::Partition, {"192.0.2.1"});
  one.ports = {443, 443};
  add(one);
  FaultSpec range = make_spec(FaultKind::Partition, {"192.0.2.2"});
  range.ports = {8000, 8100};
  add(range);
  auto tcp_to = [](const char* dst, uint16_t dport) { return PacketBuilder(kLocal4, dst).tcp(40000, dport).build(); };

  EXPECT_EQ(egress(tcp_to("192.0.2.1", 443)), Verdict::Redirect) << "tcp to port 443";
  EXPECT_EQ(egress(udp_to("192.0.2.1", 443)), Verdict::Redirect) << "udp to port 443";
  EXPECT_EQ(egress(tcp_to("192.0.2.1", 442)), Verdict::Pass);
  EXPECT_EQ(egress(tcp_to("192.0.2.1", 444)), Verdict::Pass);
  EXPECT_EQ(egress(PacketBuilder(kLocal4, "192.0.2.1").tcp(443, 50000).build()), Verdict::Pass)
      << "egress: 443 as our own (source) port is not the remote port";
  EXPECT_EQ(egress(PacketBuilder(kLocal4, "192.0.2.1").icmp().build()), Verdict::Pass) << "ICMP has no port";

  for (uint16_t p : {8000, 8001, 8050, 8099, 8100}) EXPECT_EQ(egress(tcp_to("192.0.2.2", p)), Verdict::Redirect) << p;
  for (uint16_t p : {7999, 8101, 80}) EXPECT_EQ(egress(tcp_to("192.0.2.2", p)), Verdict::Pass) << p;
}

TEST_F(ScopeTest, IngressPortIsTheSendersSourcePort) {
  FaultSpec s = make_spec(FaultKind::Partition, {"192.0.2.1"});
  s.ports = {443, 443};
  s.dir_mask = FL_DIR_INGRESS;
  add(s);
  EXPECT_EQ(ingress(PacketBuilder("192.0.2.1", kLocal4).tcp(443, 50000).build()), Verdict::Shot)
      << "a reply from the remote's port 443";
  EXPECT_EQ(ingress(PacketBuilder("192.0.2.1", kLocal4).tcp(50000, 443).build()), Verdict::Pass)
      << "a connection to our own port 443 is not the remote port";
}

TEST_F(ScopeTest, PortsAreFoundBehindOptionsAndExtensionHeadersButNotInLaterFragments) {
  FaultSpec port = make_spec(FaultKind::Partition, {"192.0.2.1", "2001:db8:a::1"});
  port.ports = {443, 443};
  add(port);
  EXPECT_EQ(egress(PacketBuilder(kLocal6, "2001:db8:a::1").ipv6_hop_by_hop().tcp(40000, 443).build()),
            Verdict::Redirect)
      << "the port behind an IPv6 hop-by-hop header";
  EXPECT_EQ(egress(PacketBuilder(kLocal6, "2001:db8:a::1").ipv6_hop_by_hop().tcp(40000, 80).build()), Verdict::Pass);
  EXPECT_EQ(egress(PacketBuilder(kLocal4, "192.0.2.1").ipv4_options(12).tcp(40000, 443).build()), Verdict::Redirect)
      << "the port behind 12 bytes of IPv4 options";
  EXPECT_EQ(egress(PacketBuilder(kLocal4, "192.0.2.1").ipv4_options(40).udp(40000, 80).build()), Verdict::Pass);
  EXPECT_EQ(egress(PacketBuilder(kLocal6, "2001:db8:a::1").ipv6_hop_by_hop().ipv6_fragment(0).udp(1, 443).build()),
            Verdict::Redirect)
      << "the port of a first IPv6 fragment, behind hop-by-hop and fragment headers";
  EXPECT_EQ(egress(PacketBuilder(kLocal6, "2001:db8:a::1").ipv6_fragment(0).udp(1, 80).build()), Verdict::Pass);

  Packet later = PacketBuilder(kLocal4, "192.0.2.1").udp(40000, 443).ipv4_fragment_offset(185).build();
  EXPECT_EQ(egress(later), Verdict::Pass) << "a non-first fragment carries no ports: a port fault cannot apply";
  Packet later6 = PacketBuilder(kLocal6, "2001:db8:a::1").ipv6_fragment(185).udp(40000, 443).build();
  EXPECT_EQ(egress(later6), Verdict::Pass) << "nor can it to a non-first IPv6 fragment";

  add(make_spec(FaultKind::Partition, {"192.0.2.9"}));
  add(make_spec(FaultKind::Partition, {"2001:db8:a::9"}));
  Packet later9 = PacketBuilder(kLocal4, "192.0.2.9").udp(40000, 443).ipv4_fragment_offset(185).build();
  EXPECT_EQ(egress(later9), Verdict::Redirect) << "a fault without ports takes every fragment";
  Packet later9_6 = PacketBuilder(kLocal6, "2001:db8:a::9").ipv6_fragment(185).udp(40000, 443).build();
  EXPECT_EQ(egress(later9_6), Verdict::Redirect) << "a fault without ports takes every IPv6 fragment";
}

TEST_F(ScopeTest, ProtoSelectsTcpUdpOrIcmpOfEitherFamily) {
  struct Case {
    uint8_t proto;
    const char* v4;
    const char* v6;
  };
  const Case cases[] = {{IPPROTO_TCP, "192.0.2.6", "2001:db8:6::1"},
                        {IPPROTO_UDP, "192.0.2.17", "2001:db8:17::1"},
                        {IPPROTO_ICMP, "192.0.2.1", "2001:db8:1::1"}};
  for (const auto& c : cases) {
    FaultSpec s = make_spec(FaultKind::Partition, {c.v4, c.v6});
    s.proto = c.proto;
    add(s);
  }
  for (const auto& c : cases) {
    for (const char* dst : {c.v4, c.v6}) {
      Packet tcp = PacketBuilder(local_for(dst), dst).tcp(40000, 80).build();
      Packet udp = PacketBuilder(local_for(dst), dst).udp(40000, 80).build();
      Packet icmp = PacketBuilder(local_for(dst), dst).icmp().build();  // ICMPv6 on IPv6
      Packet gre = PacketBuilder(local_for(dst), dst).proto(47).payload_size(8).build();
      auto want = [&](uint8_t p) { return c.proto == p ? Verdict::Redirect : Verdict::Pass; };
      std::string where = std::string(" to ") + dst + " under --proto " + proto_name(c.proto);
      EXPECT_EQ(egress(tcp), want(IPPROTO_TCP)) << "tcp" << where;
      EXPECT_EQ(egress(udp), want(IPPROTO_UDP)) << "udp" << where;
      EXPECT_EQ(egress(icmp), want(IPPROTO_ICMP)) << "icmp" << where;
      EXPECT_EQ(egress(gre), Verdict::Pass) << "gre" << where;
    }
  }
}

TEST_F(ScopeTest, DirectionKeepsEgressAndIngressApart) {
  FaultSpec out = make_spec(FaultKind::Partition, {"192.0.2.1"});
  out.dir_mask = FL_DIR_EGRESS;
  uint32_t out_slot = add(out);
  FaultSpec in = make_spec(FaultKind::Partition, {"192.0.2.2"});
  in.dir_mask = FL_DIR_INGRESS;
  uint32_t in_slot = add(in);

  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect);
  EXPECT_EQ(ingress(udp_from("192.0.2.1")), Verdict::Pass) << "an egress-only fault does not hit ingress";
  EXPECT_EQ(ingress(udp_from("192.0.2.2")), Verdict::Shot);
  EXPECT_EQ(egress(udp_to("192.0.2.2")), Verdict::Pass) << "an ingress-only fault does not hit egress";
  EXPECT_EQ(ingress(udp_to("192.0.2.2")), Verdict::Pass)
      << "ingress looks at the source: a packet from us to 192.0.2.2 is not from 192.0.2.2";
  EXPECT_EQ(stats(out_slot).matched, 1u);
  EXPECT_EQ(stats(in_slot).matched, 1u);
}

// BPF_PROG_TEST_RUN takes __sk_buff.ifindex and runs on that device, so the
// --dev scope is testable with any device of this namespace.
TEST_F(ScopeTest, DeviceScopeMatchesTheIfindexOfTheRun) {
  uint32_t dev = 0;
  std::string dev_name;
  if (struct if_nameindex* ifs = if_nameindex()) {
    for (auto* i = ifs; i->if_index != 0; ++i) {
      if (i->if_index > 1) {
        dev = i->if_index;
        dev_name = i->if_name;
        break;
      }
    }
    if_freenameindex(ifs);
  }
  if (dev == 0) GTEST_SKIP() << "no device other than loopback in this namespace to run on";

  add(make_spec(FaultKind::Partition, {"192.0.2.1"}), {.ifindex = dev});
  __sk_buff on_dev{};
  on_dev.ifindex = dev;
  RunResult r = run(egress_fd(), udp_to("192.0.2.1"), &on_dev);
  ASSERT_EQ(r.err, 0) << "test run on " << dev_name;
  EXPECT_EQ(r.ctx_out.ifindex, dev) << "the run happened on " << dev_name;
  EXPECT_EQ(r.verdict, Verdict::Redirect) << "a fault for --dev " << dev_name << " on a packet of " << dev_name;
  __sk_buff on_lo{};
  on_lo.ifindex = 1;
  r = run(egress_fd(), udp_to("192.0.2.1"), &on_lo);
  ASSERT_EQ(r.err, 0);
  EXPECT_EQ(r.verdict, Verdict::Pass) << "a fault for --dev " << dev_name << " on a packet of lo";

  add(make_spec(FaultKind::Partition, {"192.0.2.2"}));  // ifindex 0: every device
  EXPECT_EQ(run(egress_fd(), udp_to("192.0.2.2"), &on_dev).verdict, Verdict::Redirect);
  EXPECT_EQ(run(egress_fd(), udp_to("192.0.2.2"), &on_lo).verdict, Verdict::Redirect);
}

TEST_F(ScopeTest, AFaultOfAnotherNamespaceIsIgnored) {
  uint32_t other_ns = netns_ino() + 1;
  uint32_t slot = add(make_spec(FaultKind::Partition, {"192.0.2.1"}), {.netns_ino = other_ns});
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Pass) << "a program of this namespace ignores it";
  EXPECT_EQ(stats(slot).matched, 0u);

  reload(FL_EGRESS_DROP_REDIRECT, other_ns);  // the instance of the other namespace, same maps
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect) << "the other namespace's program applies it";
  EXPECT_EQ(stats(slot).matched, 1u);
}

// The test run charges the packet to a socket of the running task, so
// bpf_skb_cgroup_id() reports the cgroup v2 of this test process.
TEST_F(ScopeTest, CgroupScopeMatchesTheSendersCgroupOnEgressOnly) {
  std::ifstream cg("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cg, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  const char* mounts[] = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"};
  uint64_t id = 0;
  for (const char* m : mounts) {
    struct stat st {};
    std::string dir = std::string(m) + path;
    if (path.empty() || ::stat((dir + "/cgroup.procs").c_str(), &st) != 0) continue;
    if (::stat(dir.c_str(), &st) == 0) id = st.st_ino;
    break;
  }
  if (id == 0) GTEST_SKIP() << "no cgroup v2 hierarchy holds this process";

  FaultSpec mine = make_spec(FaultKind::Partition, {"192.0.2.1"});
  mine.dir_mask = FL_DIR_EGRESS | FL_DIR_INGRESS;
  add(mine, {.cgroup_id = id});
  add(make_spec(FaultKind::Partition, {"192.0.2.2"}), {.cgroup_id = id + 100000});
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect) << "sent from our cgroup " << id;
  EXPECT_EQ(ingress(udp_from("192.0.2.1")), Verdict::Pass) << "a cgroup owns only what it sends";
  EXPECT_EQ(egress(udp_to("192.0.2.2")), Verdict::Pass) << "a fault for another cgroup";
}

class PrecedenceTest : public NetfaultTest {
 protected:
  // Which fault took the packet: the slot whose matched counter moved.
  uint32_t winner(const Packet& pkt, const std::vector<uint32_t>& slots, bool ingress_dir = false) {
    std::vector<uint64_t> before;
    for (uint32_t s : slots) before.push_back(stats(s).matched);
    (void)(ingress_dir ? ingress(pkt) : egress(pkt));
    uint32_t won = UINT32_MAX;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (stats(slots[i]).matched == before[i]) continue;
      EXPECT_EQ(won, UINT32_MAX) << "two faults matched one packet: " << pkt.describe;
      won = slots[i];
    }
    return won;
  }
};

constexpr uint32_t kNone = UINT32_MAX;

TEST_F(PrecedenceTest, ExactAddressBeatsCidr) {
  uint32_t exact = add(make_spec(FaultKind::Partition, {"192.0.2.1"}));
  uint32_t cidr = add(make_spec(FaultKind::Partition, {"192.0.2.0/24"}));
  EXPECT_EQ(winner(udp_to("192.0.2.1"), {exact, cidr}), exact);
  EXPECT_EQ(winner(udp_to("192.0.2.2"), {exact, cidr}), cidr);
  EXPECT_EQ(winner(udp_to("192.0.3.1"), {exact, cidr}), kNone);
}

TEST_F(PrecedenceTest, LongerCidrBeatsShorterWhicheverWasAddedFirst) {
  // Short first: the /24 copies its cover's bucket.
  uint32_t a8 = add(make_spec(FaultKind::Partition, {"10.0.0.0/8"}));
  uint32_t a24 = add(make_spec(FaultKind::Partition, {"10.1.2.0/24"}));
  // Long first: adding the /8 walks every longer prefix inside it.
  uint32_t b24 = add(make_spec(FaultKind::Partition, {"172.16.5.0/24"}));
  uint32_t b8 = add(make_spec(FaultKind::Partition, {"172.0.0.0/8"}));
  std::vector<uint32_t> all = {a8, a24, b24, b8};

  EXPECT_EQ(winner(udp_to("10.1.2.3"), all), a24) << "/24 added after its /8";
  EXPECT_EQ(winner(udp_to("10.1.3.3"), all), a8);
  EXPECT_EQ(winner(udp_to("172.16.5.3"), all), b24) << "/24 added before its /8";
  EXPECT_EQ(winner(udp_to("172.16.6.3"), all), b8);

  // A /16 in between, added last, takes its share and no more.
  uint32_t a16 = add(make_spec(FaultKind::Partition, {"10.1.0.0/16"}));
  all.push_back(a16);
  EXPECT_EQ(winner(udp_to("10.1.2.3"), all), a24);
  EXPECT_EQ(winner(udp_to("10.1.9.3"), all), a16);
  EXPECT_EQ(winner(udp_to("10.2.9.3"), all), a8);

  uint32_t v6_32 = add(make_spec(FaultKind::Partition, {"2001:db8::/32"}));
  uint32_t v6_64 = add(make_spec(FaultKind::Partition, {"2001:db8:0:1::/64"}));
  EXPECT_EQ(winner(udp_to("2001:db8:0:1::5"), {v6_32, v6_64}), v6_64);
  EXPECT_EQ(winner(udp_to("2001:db8:0:2::5"), {v6_32, v6_64}), v6_32);
}

TEST_F(PrecedenceTest, MoreScopeFieldsWinATieWhicheverWasAddedFirst) {
  FaultSpec plain = make_spec(FaultKind::Partition, {"192.0.2.0/24"});
  FaultSpec tcp = plain;
  tcp.proto = IPPROTO_TCP;
  uint32_t p1 = add(plain), t1 = add(tcp);  // broad first
  FaultSpec plain2 = make_spec(FaultKind::Partition, {"203.0.113.0/24"}), tcp2 = plain2;
  tcp2.proto = IPPROTO_TCP;
  uint32_t t2 = add(tcp2), p2 = add(plain2);  // narrow first
  std::vector<uint32_t> all = {p1, t1, p2, t2};
  EXPECT_EQ(winner(PacketBuilder(kLocal4, "192.0.2.5").tcp(1, 80).build(), all), t1);
  EXPECT_EQ(winner(udp_to("192.0.2.5"), all), p1);
  EXPECT_EQ(winner(PacketBuilder(kLocal4, "203.0.113.5").tcp(1, 80).build(), all), t2);
  EXPECT_EQ(winner(udp_to("203.0.113.5"), all), p2);

  // The same tie on one exact address: a port-scoped fault beats a plain one.
  FaultSpec any_port = make_spec(FaultKind::Partition, {"198.18.0.1"}), https = any_port;
  https.ports = {443, 443};
  uint32_t e_any = add(any_port), e_https = add(https);
  EXPECT_EQ(winner(udp_to("198.18.0.1", 443), {e_any, e_https}), e_https);
  EXPECT_EQ(winner(udp_to("198.18.0.1", 80), {e_any, e_https}), e_any);
}

TEST_F(PrecedenceTest, CoveringPrefixTakesWhatAnInnerFaultLeaves) {
  FaultSpec inner = make_spec(FaultKind::Partition, {"10.1.2.0/24"});
  inner.ports = {443, 443};
  uint32_t in24 = add(inner);
  uint32_t out8 = add(make_spec(FaultKind::Partition, {"10.0.0.0/8"}));  // added after
  EXPECT_EQ(winner(udp_to("10.1.2.3", 443), {in24, out8}), in24);
  EXPECT_EQ(winner(udp_to("10.1.2.3", 80), {in24, out8}), out8) << "the /24 skips port 80; its /8 takes it";
  EXPECT_EQ(egress(udp_to("10.1.2.3", 80)), Verdict::Redirect);

  uint32_t out8b = add(make_spec(FaultKind::Partition, {"172.0.0.0/8"}));  // added before
  FaultSpec inner_b = make_spec(FaultKind::Partition, {"172.16.5.0/24"});
  inner_b.ports = {443, 443};
  uint32_t in24b = add(inner_b);
  EXPECT_EQ(winner(udp_to("172.16.5.3", 443), {in24b, out8b}), in24b);
  EXPECT_EQ(winner(udp_to("172.16.5.3", 80), {in24b, out8b}), out8b);

  FaultSpec host = make_spec(FaultKind::Partition, {"10.1.2.3"});
  host.proto = IPPROTO_TCP;
  uint32_t h = add(host);
  EXPECT_EQ(winner(PacketBuilder(kLocal4, "10.1.2.3").tcp(1, 80).build(), {h, in24, out8}), h);
  EXPECT_EQ(winner(udp_to("10.1.2.3", 443), {h, in24, out8}), in24) << "an exact fault that does not apply";
  EXPECT_EQ(winner(udp_to("10.1.2.3", 80), {h, in24, out8}), out8);
}

}  // namespace
}  // namespace faultline::bpftest
