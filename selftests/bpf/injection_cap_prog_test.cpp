// --max-injections and --start-after in the kernel: fl_budget read by the real
// fl_egress, run on crafted packets, on one CPU and on every CPU at once.
#include <bpf/bpf.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <thread>

#include "base/clock.h"
#include "loader/netfault_attachments.h"
#include "selftests/bpf/netfault_fixture.h"

namespace faultline::bpftest {
namespace {

constexpr const char* kCapTarget = "192.0.2.1";
constexpr const char* kCapOther = "192.0.2.2";

class InjectionCapTest : public NetfaultTest {};

uint32_t prog_id(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.id;
}

TEST_F(InjectionCapTest, LossAtHundredPercentDropsExactlyTheFirstNThenPasses) {
  FaultSpec s = make_spec(FaultKind::Loss, {kCapTarget});
  s.max_injections = 7;
  uint32_t slot = add(s);
  for (int i = 0; i < 25; ++i) {
    EXPECT_EQ(egress(udp_to(kCapTarget)), i < 7 ? egress_drop() : Verdict::Pass)
        << "packet " << i << " of 25 under a cap of 7";
  }
  EXPECT_EQ(stats(slot).matched, 25u) << "a capped fault still matches every packet";
  EXPECT_EQ(stats(slot).dropped, 7u);
  EXPECT_EQ(reason(FL_DROP_LOSS), 7u);
  fl_budget b = table().budget(slot);
  EXPECT_EQ(b.max, 7u);
  EXPECT_EQ(b.claimed, 25u) << "every drop decision takes a ticket, the refused ones too";
  const uint64_t now = boottime_ns();
  EXPECT_NE(b.reached_ns, 0u) << "the kernel stamps the moment the cap is reached";
  EXPECT_LE(b.reached_ns, now);
  nlohmann::json j = cap_json(b, now);
  EXPECT_EQ(j["injected"], 7u);
  EXPECT_EQ(j["reached"], true);
  EXPECT_EQ(j["spared"], 18u);
  EXPECT_TRUE(j.contains("reached_at")) << j.dump();
  EXPECT_NE(cap_text(b, now).find("cap reached: 7 injections at "), std::string::npos) << cap_text(b, now);
}

TEST_F(InjectionCapTest, CapCountsInjectionsNotMatches) {
  // At 50% only the packets the draw drops take a ticket: 400 packets, cap 20.
  FaultSpec s = make_spec(FaultKind::Loss, {kCapTarget});
  s.percent = 50;
  s.max_injections = 20;
  uint32_t slot = add(s);
  int dropped_before_cap = 0;
  for (int i = 0; i < 400; ++i) {
    if (egress(udp_to(kCapTarget)) != Verdict::Pass) ++dropped_before_cap;
  }
  EXPECT_EQ(dropped_before_cap, 20);
  EXPECT_EQ(stats(slot).dropped, 20u);
  fl_budget b = table().budget(slot);
  EXPECT_GT(b.claimed, 100u) << "about 200 of 400 packets draw a drop";
  EXPECT_LT(b.claimed, 300u);
}

TEST_F(InjectionCapTest, CappedPartitionLeavesAnUncappedNeighbourAlone) {
  FaultSpec capped = make_spec(FaultKind::Partition, {kCapTarget});
  capped.max_injections = 3;
  uint32_t a = add(capped);
  uint32_t b = add(make_spec(FaultKind::Partition, {kCapOther}));
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(egress(udp_to(kCapTarget)), i < 3 ? egress_drop() : Verdict::Pass) << "capped, packet " << i;
    EXPECT_EQ(egress(udp_to(kCapOther)), egress_drop()) << "uncapped, packet " << i;
  }
  EXPECT_EQ(stats(a).dropped, 3u);
  EXPECT_EQ(stats(b).dropped, 10u);
  EXPECT_EQ(table().budget(b).max, 0u) << "an uncapped fault has no budget entry";
}

// Two threads on two CPUs race through BPF_PROG_TEST_RUN with many repeats: the
// atomic ticket keeps the total at the cap exactly.
TEST_F(InjectionCapTest, CapHoldsExactlyAcrossCpus) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 2) GTEST_SKIP() << "needs two CPUs to race";
  FaultSpec s = make_spec(FaultKind::Loss, {kCapTarget});
  constexpr uint32_t kRepeat = 20000, kCap = 25000;
  s.max_injections = kCap;
  uint32_t slot = add(s);
  Packet pkt = udp_to(kCapTarget);
  auto worker = [&](int cpu, int* err) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    std::vector<uint8_t> out(pkt.bytes.size() + 256);
    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt.bytes.data(), .data_out = out.data(),
                .data_size_in = static_cast<__u32>(pkt.bytes.size()), .data_size_out = static_cast<__u32>(out.size()),
                .repeat = kRepeat);
    *err = bpf_prog_test_run_opts(egress_fd(), &o);
  };
  int e0 = 0, e1 = 0;
  std::thread t0(worker, 0, &e0), t1(worker, 1, &e1);
  t0.join();
  t1.join();
  ASSERT_EQ(e0, 0);
  ASSERT_EQ(e1, 0);
  EXPECT_EQ(stats(slot).matched, 2u * kRepeat);
  EXPECT_EQ(stats(slot).dropped, kCap) << "the cap over both CPUs";
  fl_budget b = table().budget(slot);
  EXPECT_EQ(b.claimed, 2u * kRepeat);
}

TEST_F(InjectionCapTest, DelayedStartIsInertUntilItsTime) {
  FaultSpec s = make_spec(FaultKind::Partition, {kCapTarget});
  s.start_after_ns = 400'000'000ULL;
  AddOptions o;
  o.start_after_ns = s.start_after_ns;
  uint32_t slot = add(s, o);
  EXPECT_EQ(egress(udp_to(kCapTarget)), Verdict::Pass) << "before its start the fault is not there";
  EXPECT_EQ(stats(slot).matched, 0u) << "an inert fault matches nothing";
  sleep_ms(450);
  EXPECT_EQ(egress(udp_to(kCapTarget)), egress_drop()) << "after its start the fault drops";
  EXPECT_EQ(stats(slot).dropped, 1u);
}

TEST_F(InjectionCapTest, ProgramsAreKnownToReadTheBudgetMap) {
  // The check that refuses a capped fault on programs from an older faultctl.
  const uint32_t id = prog_id(egress_fd());
  ASSERT_NE(id, 0u);
  EXPECT_TRUE(prog_uses_map(id, maps().budget()));
  EXPECT_FALSE(prog_uses_map(id, maps().meta())) << "fl_meta is userspace bookkeeping; no program reads it";
}

}  // namespace
}  // namespace faultline::bpftest
