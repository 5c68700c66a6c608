// How a proxy's toxics combine on one direction of one connection, and the
// per-connection toxicity draw.
#include "userspace/proxy/toxic_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>

namespace {

using namespace faultline;

ToxicEntry entry(uint64_t uid, Stream stream, ToxicAttributes a, double toxicity = 1.0) {
  Toxic t;
  t.name = "t" + std::to_string(uid);
  t.stream = stream;
  t.toxicity = toxicity;
  t.attributes = a;
  return ToxicEntry{t, uid, uid + 1000, std::make_shared<std::atomic<uint64_t>>(0)};
}

TEST(ToxicPlan, ToxicsOnOneStreamCombine) {
  ToxicSet set;
  set.toxics = {entry(1, Stream::downstream, LatencyToxic{50, 5}), entry(2, Stream::downstream, LatencyToxic{20, 1}),
                entry(3, Stream::downstream, BandwidthToxic{300}), entry(4, Stream::downstream, BandwidthToxic{100}),
                entry(5, Stream::downstream, LimitDataToxic{900}), entry(6, Stream::downstream, LimitDataToxic{700}),
                entry(7, Stream::downstream, SlowCloseToxic{10}),  entry(8, Stream::downstream, SlowCloseToxic{15}),
                entry(9, Stream::upstream, LatencyToxic{1000, 0})};
  auto plan = plan_direction(set, Stream::downstream, 42, {});
  EXPECT_EQ(plan.latency_ms, 70);
  EXPECT_EQ(plan.jitter_ms, 6);
  EXPECT_EQ(plan.rate_kbps, 100);
  EXPECT_EQ(plan.limit_bytes, 700);
  EXPECT_EQ(plan.slow_close_ms, 25);
  EXPECT_EQ(plan.uids.size(), 8u) << "the upstream toxic leaked into the downstream plan";
  auto up = plan_direction(set, Stream::upstream, 42, {});
  EXPECT_EQ(up.latency_ms, 1000);
  EXPECT_EQ(up.limit_bytes, -1);
  EXPECT_EQ(up.rate_kbps, 0);
}

TEST(ToxicPlan, ResetPeerClockWinsOverTimeout) {
  ToxicSet set;
  set.toxics = {entry(1, Stream::upstream, TimeoutToxic{500}), entry(2, Stream::upstream, ResetPeerToxic{300}),
                entry(3, Stream::upstream, ResetPeerToxic{100})};
  auto plan = plan_direction(set, Stream::upstream, 1, {});
  EXPECT_TRUE(plan.hold);
  EXPECT_TRUE(plan.deadline_reset);
  EXPECT_EQ(plan.deadline_ms, 300);
  EXPECT_EQ(plan.deadline_key, 1002u);
  ToxicSet only_timeout;
  only_timeout.toxics = {entry(1, Stream::upstream, TimeoutToxic{0})};
  auto held = plan_direction(only_timeout, Stream::upstream, 1, {});
  EXPECT_TRUE(held.hold);
  EXPECT_EQ(held.deadline_key, 0u) << "timeout 0 holds forever: no clock";
}

TEST(ToxicPlan, ActivationsCountOncePerConnection) {
  ToxicSet set;
  set.toxics = {entry(1, Stream::downstream, NoopToxic{})};
  auto first = plan_direction(set, Stream::downstream, 7, {});
  auto again = plan_direction(set, Stream::downstream, 7, first);
  EXPECT_EQ(set.toxics[0].activations->load(), 1u);
  (void)again;
}

TEST(ToxicPlan, ToxicityIsADrawPerConnection) {
  int applied = 0;
  const int n = 100000;
  for (int seed = 0; seed < n; ++seed) applied += toxic_applies(splitmix64(uint64_t(seed)), 77, 0.25) ? 1 : 0;
  EXPECT_NEAR(applied, n / 4, 4 * 137);  // sd of Binomial(1e5, 0.25) is 137
  for (int seed = 0; seed < 1000; ++seed) {
    uint64_t s = splitmix64(uint64_t(seed));
    EXPECT_EQ(toxic_applies(s, 77, 0.25), toxic_applies(s, 77, 0.25)) << "the draw is not fixed";
    if (toxic_applies(s, 77, 0.25)) {
      EXPECT_TRUE(toxic_applies(s, 77, 0.5)) << "raising the toxicity dropped a connection";
    }
    EXPECT_FALSE(toxic_applies(s, 77, 0.0));
    EXPECT_TRUE(toxic_applies(s, 77, 1.0));
  }
}

}  // namespace

namespace {

// Toxiproxy takes any int64; the plan reads a negative one as 0 and caps the
// rest, so nothing the API accepts can wrap a clock.
TEST(ToxicPlan, NegativeAndHugeValuesAreReadSafely) {
  ToxicSet set;
  set.toxics = {entry(1, Stream::downstream, LatencyToxic{-50, -5}),
                entry(2, Stream::downstream, LatencyToxic{INT64_MAX, INT64_MAX}),
                entry(3, Stream::downstream, BandwidthToxic{-1}), entry(4, Stream::downstream, LimitDataToxic{-3}),
                entry(5, Stream::downstream, ResetPeerToxic{INT64_MAX})};
  const DirectionPlan p = plan_direction(set, Stream::downstream, 7, {});
  EXPECT_EQ(p.latency_ms, kToxicMaxMs);
  EXPECT_EQ(p.jitter_ms, kToxicMaxMs);
  EXPECT_EQ(p.rate_kbps, 0) << "a negative rate is no limit, as Toxiproxy's";
  EXPECT_EQ(p.limit_bytes, 0) << "a negative limit passes nothing, as Toxiproxy's";
  EXPECT_EQ(p.deadline_ms, kToxicMaxMs);
  set.toxics = {entry(1, Stream::downstream, LatencyToxic{-50, 0})};
  EXPECT_EQ(plan_direction(set, Stream::downstream, 7, {}).latency_ms, 0);
}

// The slicer: a piece is never longer than average + variation once split,
// never empty, never past the chunk, whatever the sizes (Toxiproxy panics or
// recurses forever on some of these).
TEST(ToxicPlan, SlicerSplitsWithinTheVariationAndAlwaysEnds) {
  struct Case {
    int64_t average, variation;
  } cases[] = {{1000, 1000}, {10, 500}, {0, 0}, {-10, -3}, {100, 20}, {1, 0}, {4096, 0}, {INT64_MAX, INT64_MAX}};
  for (const Case& c : cases) {
    const SlicerToxic s{c.average, c.variation, 0};
    const uint64_t bound =
        uint64_t(std::clamp<int64_t>(c.average, 0, 1 << 30) + std::clamp<int64_t>(c.variation, 0, 1 << 30));
    for (uint64_t len : {1ULL, 2ULL, 3ULL, 999ULL, 2001ULL, 16384ULL, 65536ULL}) {
      uint64_t left = len, draw = len * 31 + uint64_t(c.average), slices = 0;
      while (left > 0) {
        const uint64_t piece = split_slice(left, s, draw = splitmix64(draw));
        ASSERT_GE(piece, 1u) << c.average << "/" << c.variation << " len " << len;
        ASSERT_LE(piece, left);
        ASSERT_TRUE(piece <= std::max<uint64_t>(bound, 1)) << c.average << "/" << c.variation << " piece " << piece;
        left -= piece;
        ++slices;
      }
      if (c.average == 1000 && c.variation == 1000 && len <= 2000)
        EXPECT_EQ(slices, 1u) << "within the variation: not split";
    }
  }
}

// first_n: the first N connections accepted after the toxic was added take
// a slot, each once; a connection open before it came is never counted; what
// was decided stays with the connection through later refolds.
TEST(ToxicPlan, FirstNGivesSlotsToTheFirstConnectionsAfterTheAdd) {
  ToxicSet set;
  set.toxics = {entry(1, Stream::downstream, ResetPeerToxic{0, 3})};
  set.toxics[0].added_ns = 1000;
  DirectionPlan old_conn = plan_direction(set, Stream::downstream, 99, {}, 500);
  EXPECT_TRUE(old_conn.uids.empty()) << "a connection accepted before the add is not counted";
  std::vector<DirectionPlan> plans;
  for (uint64_t i = 0; i < 10; ++i) plans.push_back(plan_direction(set, Stream::downstream, i, {}, 2000 + i));
  for (size_t i = 0; i < plans.size(); ++i) EXPECT_EQ(plans[i].deadline_reset, i < 3) << "connection " << i;
  EXPECT_EQ(set.toxics[0].activations->load(), 3u);
  // Refolds (a toxic set change) keep each decision and take no new slot.
  ToxicSet again = set;
  again.toxics.push_back(entry(2, Stream::downstream, LatencyToxic{5}));
  for (size_t i = 0; i < plans.size(); ++i) {
    DirectionPlan next = plan_direction(again, Stream::downstream, i, plans[i], 2000 + i);
    EXPECT_EQ(next.deadline_reset, i < 3) << "connection " << i << " after a refold";
  }
  EXPECT_EQ(set.toxics[0].first_n_taken->load(), 3u);
}

TEST(ToxicPlan, LimitTimeAndSlowOpen) {
  ToxicSet set;
  set.toxics = {entry(1, Stream::downstream, LimitTimeToxic{400}), entry(2, Stream::upstream, SlowOpenToxic{100}),
                entry(3, Stream::upstream, SlowOpenToxic{50})};
  DirectionPlan down = plan_direction(set, Stream::downstream, 1, {});
  EXPECT_EQ(down.deadline_ms, 400);
  EXPECT_FALSE(down.deadline_reset) << "limit_time closes with a FIN";
  EXPECT_FALSE(down.hold) << "limit_time lets data through until its time";
  DirectionPlan up = plan_direction(set, Stream::upstream, 1, {});
  EXPECT_EQ(up.open_delay_ms, 150) << "slow_open delays add";
  // A reset_peer's clock still wins.
  set.toxics.push_back(entry(4, Stream::downstream, ResetPeerToxic{900}));
  DirectionPlan both = plan_direction(set, Stream::downstream, 1, {});
  EXPECT_TRUE(both.deadline_reset);
  EXPECT_EQ(both.deadline_ms, 900);
}

}  // namespace
