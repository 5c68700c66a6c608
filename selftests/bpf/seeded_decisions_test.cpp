// --seed in the kernel: a seeded fault's decisions follow its per-CPU fl_rng
// state, so the same packets on the same CPU get the same decisions run after
// run, a different seed gives different ones, and the rates stay the rates.
#include <bpf/bpf.h>

#include <cstring>
#include <set>

#include "base/seeded_random.h"
#include "loader/netfault_attachments.h"
#include "selftests/bpf/netfault_fixture.h"

namespace faultline::bpftest {
namespace {

constexpr const char* kSeedTarget = "192.0.2.1";
constexpr int kPackets = 1000;

class SeededDecisionsTest : public NetfaultTest {
 protected:
  // Installs a fault, sends kPackets to its target on the fixture's CPU, records
  // each verdict (true = dropped), and removes the fault again: one "run".
  std::vector<bool> drop_sequence(FaultSpec s) {
    uint32_t slot = add(s);
    std::vector<bool> dropped;
    dropped.reserve(kPackets);
    const Packet pkt = udp_to(kSeedTarget);
    for (int i = 0; i < kPackets; ++i) {
      Verdict v = egress(pkt);
      if (v != Verdict::Pass && v != egress_drop()) {
        ADD_FAILURE() << "packet " << i << ": a loss fault returned " << ::testing::PrintToString(v);
        break;
      }
      dropped.push_back(v != Verdict::Pass);
    }
    EXPECT_EQ(stats(slot).matched, static_cast<uint64_t>(kPackets));
    EXPECT_TRUE(table().remove(slot).ok());
    return dropped;
  }

  static FaultSpec loss(double percent, std::optional<uint64_t> seed, double correlation = 0) {
    FaultSpec s = make_spec(FaultKind::Loss, {kSeedTarget});
    s.percent = percent;
    s.correlation = correlation;
    s.seed = seed;
    return s;
  }

  static size_t count(const std::vector<bool>& v) { return static_cast<size_t>(std::count(v.begin(), v.end(), true)); }
  static size_t differences(const std::vector<bool>& a, const std::vector<bool>& b) {
    size_t n = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
    return n + (a.size() > b.size() ? a.size() - b.size() : b.size() - a.size());
  }
};

TEST_F(SeededDecisionsTest, SameSeedSameCpuGivesTheSameDropsAtTheSameRate) {
  const std::vector<bool> first = drop_sequence(loss(30, 42));
  const std::vector<bool> again = drop_sequence(loss(30, 42));
  ASSERT_EQ(first.size(), static_cast<size_t>(kPackets));
  EXPECT_EQ(differences(first, again), 0u) << "seed 42 on CPU " << pinned_cpu() << ": the replay decided differently";
  // 1000 draws at p = 0.3: sd ~14.5, so 250..350 is more than 3 sd either side.
  EXPECT_GE(count(first), 250u) << "drops of " << kPackets << " at 30%";
  EXPECT_LE(count(first), 350u) << "drops of " << kPackets << " at 30%";
}

TEST_F(SeededDecisionsTest, DifferentSeedGivesDifferentDropsAtTheSameRate) {
  const std::vector<bool> a = drop_sequence(loss(30, 42));
  const std::vector<bool> b = drop_sequence(loss(30, 43));
  // Two independent 30% sequences differ at ~42% of positions.
  EXPECT_GT(differences(a, b), 300u) << "seeds 42 and 43 gave nearly the same decisions";
  EXPECT_GE(count(b), 250u);
  EXPECT_LE(count(b), 350u);
}

TEST_F(SeededDecisionsTest, KernelStreamIsTheUserspaceGeneratorForThisCpu) {
  // The programs step fl_rng exactly as SeededRandom does (seeded_state(seed,
  // cpu), xorshift64*): the kernel's decisions can be predicted, and so the two
  // implementations cannot drift apart unnoticed.
  const uint64_t seed = 0xDEADBEEFCAFEF00DULL;
  const std::vector<bool> kernel = drop_sequence(loss(30, seed));
  SeededRandom model(seed, static_cast<uint64_t>(pinned_cpu()));
  const uint32_t prob = percent_to_prob(30);
  std::vector<bool> predicted;
  for (int i = 0; i < kPackets; ++i) predicted.push_back(model.chance(prob));
  EXPECT_EQ(differences(kernel, predicted), 0u);
}

TEST_F(SeededDecisionsTest, CorrelatedLossReplaysToo) {
  const std::vector<bool> a = drop_sequence(loss(30, 7, 60));
  const std::vector<bool> b = drop_sequence(loss(30, 7, 60));
  EXPECT_EQ(differences(a, b), 0u) << "correlated loss draws twice per packet; both draws are seeded";
  EXPECT_NE(differences(a, drop_sequence(loss(30, 8, 60))), 0u);
}

TEST_F(SeededDecisionsTest, CorruptFlipsTheSameBitsUnderTheSameSeed) {
  auto flips = [&](uint64_t seed) {
    FaultSpec s = make_spec(FaultKind::Corrupt, {kSeedTarget});
    s.percent = 50;
    s.seed = seed;
    uint32_t slot = add(s);
    const Packet pkt = PacketBuilder(kLocal4, kSeedTarget).udp(40000, 80).payload_size(64).build();
    std::vector<std::vector<uint8_t>> out;
    for (int i = 0; i < 200; ++i) {
      RunResult r = run(egress_fd(), pkt);
      EXPECT_EQ(r.err, 0);
      out.push_back(r.data_out);
    }
    EXPECT_GT(stats(slot).corrupted, 60u) << "about half of 200 at 50%";
    EXPECT_TRUE(table().remove(slot).ok());
    return out;
  };
  const auto a = flips(99), b = flips(99), c = flips(100);
  EXPECT_TRUE(a == b) << "which packets are corrupted, and which byte and bit, follow the seed";
  EXPECT_FALSE(a == c) << "another seed corrupts other packets or bits";
}

TEST_F(SeededDecisionsTest, EachCpuHasItsOwnStateAndTheSeedIsReadBack) {
  uint32_t slot = add(loss(30, 42));
  EXPECT_EQ(table().seed(slot), std::optional<uint64_t>(42));
  auto per_cpu = lookup_percpu<fl_rng>(maps().rng(), slot);
  ASSERT_TRUE(per_cpu.ok());
  std::set<uint64_t> states;
  for (size_t cpu = 0; cpu < per_cpu->size(); ++cpu) {
    EXPECT_EQ((*per_cpu)[cpu].seed, 42u);
    EXPECT_EQ((*per_cpu)[cpu].state, seeded_state(42, cpu)) << "CPU " << cpu;
    states.insert((*per_cpu)[cpu].state);
  }
  EXPECT_EQ(states.size(), per_cpu->size()) << "no two CPUs share a stream";
  uint32_t unseeded = add(make_spec(FaultKind::Partition, {"192.0.2.9"}));
  EXPECT_EQ(table().seed(unseeded), std::nullopt) << "a partition makes no random decision and has no seed";
}

TEST_F(SeededDecisionsTest, ProgramsAreKnownToReadTheGeneratorMap) {
  // The check that refuses a seeded fault on programs from an older faultctl.
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  ASSERT_EQ(bpf_obj_get_info_by_fd(egress_fd(), &info, &len), 0);
  EXPECT_TRUE(prog_uses_map(info.id, maps().rng()));
}

}  // namespace
}  // namespace faultline::bpftest
