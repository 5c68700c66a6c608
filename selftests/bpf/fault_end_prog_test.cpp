// How a fault ends: on time in the kernel, by the kill switch, by deactivate() and
// remove(); and the counters it leaves behind.
#include <bpf/bpf.h>

#include <chrono>
#include <thread>

#include "selftests/bpf/netfault_fixture.h"
#include "userspace/faults/packet/netfault_engine.h"

namespace faultline::bpftest {
namespace {

class LifecycleTest : public NetfaultTest {};

TEST_F(LifecycleTest, AFaultPastItsExpiryIsIgnored) {
  uint32_t slot = add(make_spec(FaultKind::Partition, {"192.0.2.1"}), {.expires_ns = boottime_ns() - 1});
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Pass) << "expires_ns is in the past";
  EXPECT_EQ(stats(slot).matched, 0u);
}

TEST_F(LifecycleTest, AFaultEndsOnTimeWithNobodyTouchingTheMaps) {
  constexpr uint64_t kLife = 300'000'000;  // 300 ms
  uint64_t start = boottime_ns();
  uint32_t slot = add(make_spec(FaultKind::Partition, {"192.0.2.1"}), {.expires_ns = start + kLife});
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect) << "within its lifetime";
  std::this_thread::sleep_for(std::chrono::nanoseconds(start + kLife + 20'000'000 - boottime_ns()));
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Pass) << "20 ms after expires_ns, no userspace involved";
  EXPECT_EQ(stats(slot).matched, 1u);
  EXPECT_TRUE(table().exists(slot)) << "the entry is still there for the reaper";
}

TEST_F(LifecycleTest, KillSwitchMakesEveryProgramPassAtOnce) {
  FaultSpec part = make_spec(FaultKind::Partition, {"192.0.2.1"});
  part.dir_mask = FL_DIR_EGRESS | FL_DIR_INGRESS;
  uint32_t p = add(part);
  uint32_t c = add(make_spec(FaultKind::Corrupt, {"192.0.2.2"}));
  FaultSpec dns = make_spec(FaultKind::Dns);
  dns.domains = {"example.com"};
  add(dns);
  FaultSpec every = make_spec(FaultKind::Loss);  // ::/0
  uint32_t l = add(every);
  Packet q = PacketBuilder(kLocal4, "192.0.2.53").udp(40000, 53).dns("example.com").build();
  Packet corrupt_me = udp_to("192.0.2.2", 80, 64);

  ASSERT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect);
  set_armed(0);
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Pass) << "partition while disarmed";
  EXPECT_EQ(ingress(udp_from("192.0.2.1")), Verdict::Pass) << "ingress partition while disarmed";
  EXPECT_EQ(egress(q), Verdict::Pass) << "dns while disarmed";
  EXPECT_EQ(egress(udp_to("203.0.113.1")), Verdict::Pass) << "loss 100% everywhere while disarmed";
  RunResult r = run(egress_fd(), corrupt_me);
  EXPECT_EQ(r.data_out, corrupt_me.bytes) << "corrupt while disarmed";
  EXPECT_EQ(stats(p).matched, 1u) << "a disarmed program does not even count";
  EXPECT_EQ(stats(c).matched, 0u);
  EXPECT_EQ(stats(l).matched, 0u);

  set_armed(1);
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect) << "re-armed";
  EXPECT_EQ(egress(udp_to("203.0.113.1")), Verdict::Redirect);
}

TEST_F(LifecycleTest, DeactivateEndsTheFaultButKeepsItsIndexes) {
  uint32_t slot = add(make_spec(FaultKind::Partition, {"192.0.2.1", "10.0.0.0/8"}));
  ASSERT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect);
  ASSERT_TRUE(table().deactivate(slot).ok());
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Pass) << "deactivated";
  EXPECT_EQ(egress(udp_to("10.9.9.9")), Verdict::Pass) << "deactivated";
  EXPECT_TRUE(table().exists(slot));
  EXPECT_EQ(count_keys<fl_addr>(maps().exact()), 1u);
  EXPECT_EQ(count_keys<fl_lpm_key>(maps().prefix()), 1u);
}

TEST_F(LifecycleTest, RemoveLeavesNoIndexKeyBehind) {
  FaultSpec flow = make_spec(FaultKind::Flowdrop);
  for (int i = 1; i <= 50; ++i) flow.targets.push_back(prefix("198.18.0." + std::to_string(i)));
  flow.targets.push_back(prefix("2001:db8:f::1"));
  std::vector<uint32_t> slots = {
      add(flow),
      add(make_spec(FaultKind::Partition, {"10.0.0.0/8", "2001:db8:b::/48"})),
      add(make_spec(FaultKind::Partition, {"10.1.2.0/24", "10.1.0.0/16"})),
      add(make_spec(FaultKind::Loss)),
  };
  FaultSpec dns = make_spec(FaultKind::Dns, {"192.0.2.53"});
  dns.domains = {"example.com", "a.example.org", "blocked.test"};
  slots.push_back(add(dns));
  ASSERT_EQ(count_keys<fl_addr>(maps().exact()), 51u);
  ASSERT_EQ(count_keys<fl_lpm_key>(maps().prefix()), 5u) << "/8, /16, /24, /48 and ::/0";
  ASSERT_EQ(count_keys<fl_dns_key>(maps().dns()), 3u);
  ASSERT_EQ(egress(udp_to("198.18.0.7")), Verdict::Redirect);

  for (uint32_t s : slots) ASSERT_TRUE(table().remove(s).ok()) << "remove slot " << s;
  EXPECT_EQ(count_keys<fl_addr>(maps().exact()), 0u) << "fl_exact keys left";
  EXPECT_EQ(count_keys<fl_lpm_key>(maps().prefix()), 0u) << "fl_prefix keys left";
  EXPECT_EQ(count_keys<fl_dns_key>(maps().dns()), 0u) << "fl_dns keys left";
  EXPECT_EQ(count_keys<uint32_t>(maps().meta()), 0u) << "fl_meta keys left";
  for (uint32_t s : slots) {
    fl_fault f{};
    ASSERT_EQ(bpf_map_lookup_elem(maps().faults(), &s, &f), 0);
    EXPECT_EQ(f.kind, FL_KIND_NONE) << "slot " << s << " is cleared";
    EXPECT_EQ(f.expires_ns, 0u);
  }
  EXPECT_EQ(egress(udp_to("198.18.0.7")), Verdict::Pass);
  EXPECT_EQ(egress(udp_to("10.1.2.3")), Verdict::Pass);
  EXPECT_EQ(egress(PacketBuilder(kLocal4, "192.0.2.53").udp(1, 53).dns("example.com").build()), Verdict::Pass);
}

TEST_F(LifecycleTest, RemovingOneOfTwoNestedFaultsKeepsTheOther) {
  uint32_t a8 = add(make_spec(FaultKind::Partition, {"10.0.0.0/8"}));
  uint32_t a24 = add(make_spec(FaultKind::Loss, {"10.1.2.0/24"}));
  ASSERT_TRUE(table().remove(a24).ok());
  EXPECT_EQ(egress(udp_to("10.1.2.3")), Verdict::Redirect) << "after the /24 is gone its /8 takes the address";
  EXPECT_EQ(stats(a8).matched, 1u);
  EXPECT_EQ(count_keys<fl_lpm_key>(maps().prefix()), 1u) << "only the /8 key stays";

  uint32_t b8 = add(make_spec(FaultKind::Partition, {"172.0.0.0/8"}));
  uint32_t b24 = add(make_spec(FaultKind::Partition, {"172.16.5.0/24"}));
  ASSERT_TRUE(table().remove(b8).ok());
  EXPECT_EQ(egress(udp_to("172.16.5.3")), Verdict::Redirect) << "the /24 outlives its removed /8";
  EXPECT_EQ(egress(udp_to("172.16.6.3")), Verdict::Pass) << "the /8 is gone";
  EXPECT_EQ(stats(b24).matched, 1u);
}

TEST_F(LifecycleTest, CountersTellMatchesDropsBytesAndReasons) {
  uint32_t loss = add(make_spec(FaultKind::Loss, {"192.0.2.1"}));
  uint32_t part = add(make_spec(FaultKind::Partition, {"192.0.2.2"}));
  uint32_t flow = add(make_spec(FaultKind::Flowdrop, {"192.0.2.3"}));
  FaultSpec d = make_spec(FaultKind::Dns);
  d.domains = {"example.com"};
  uint32_t dns = add(d);
  FaultSpec half = make_spec(FaultKind::Loss, {"192.0.2.4"});
  half.percent = 0;
  uint32_t zero = add(half);

  uint64_t loss_bytes = 0;
  for (int i = 0; i < 3; ++i) {
    Packet p = udp_to("192.0.2.1", 80, 10 * i);
    loss_bytes += p.bytes.size();
    ASSERT_EQ(egress(p), Verdict::Redirect);
  }
  for (int i = 0; i < 5; ++i) ASSERT_EQ(egress(udp_to("192.0.2.2")), Verdict::Redirect);
  for (int i = 0; i < 7; ++i) ASSERT_EQ(egress(udp_to("192.0.2.3")), Verdict::Redirect);
  for (int i = 0; i < 11; ++i)
    ASSERT_EQ(egress(PacketBuilder(kLocal4, "192.0.2.53").udp(1, 53).dns("x.example.com").build()), Verdict::Redirect);
  for (int i = 0; i < 13; ++i) ASSERT_EQ(egress(udp_to("192.0.2.4")), Verdict::Pass);

  EXPECT_EQ(stats(loss).matched, 3u);
  EXPECT_EQ(stats(loss).dropped, 3u);
  EXPECT_EQ(stats(loss).bytes, loss_bytes) << "bytes count whole frames";
  EXPECT_EQ(stats(part).dropped, 5u);
  EXPECT_EQ(stats(flow).dropped, 7u);
  EXPECT_EQ(stats(dns).dropped, 11u);
  EXPECT_EQ(stats(zero).matched, 13u);
  EXPECT_EQ(stats(zero).dropped, 0u);

  EXPECT_EQ(reason(FL_DROP_NONE), 0u);
  EXPECT_EQ(reason(FL_DROP_LOSS), 3u);
  EXPECT_EQ(reason(FL_DROP_PARTITION), 5u);
  EXPECT_EQ(reason(FL_DROP_FLOWDROP), 7u);
  EXPECT_EQ(reason(FL_DROP_DNS), 11u);
  EXPECT_EQ(reason(FL_DROP_RATE_HORIZON), 0u);
  std::vector<uint64_t> all = table().drop_reasons();
  ASSERT_EQ(all.size(), static_cast<size_t>(FL_DROP_REASON_MAX));
  EXPECT_EQ(all[FL_DROP_FLOWDROP], 7u) << "FaultTable::drop_reasons() reads the same counters";

  // The counters live on the CPU that ran the packets.
  auto per = lookup_percpu<fl_fault_stats>(maps().stats(), part);
  ASSERT_TRUE(per.ok());
  ASSERT_LT(pinned_cpu(), static_cast<int>(per->size()));
  EXPECT_EQ((*per)[static_cast<size_t>(pinned_cpu())].dropped, 5u) << "on CPU " << pinned_cpu();
}

}  // namespace
}  // namespace faultline::bpftest
