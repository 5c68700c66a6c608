// SeededRandom: the generator --seed drives, in userspace and (stepped the same
// way) in the packet programs.
#include "base/seeded_random.h"

#include <gtest/gtest.h>

#include <set>

#include "base/units.h"

namespace faultline {
namespace {

TEST(SeededRandom, SameSeedAndStreamSameDrawsOthersDiffer) {
  SeededRandom a(42), b(42), other_seed(43), other_stream(42, 1);
  int same_as_other_seed = 0, same_as_other_stream = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint32_t x = a.next_u32();
    EXPECT_EQ(x, b.next_u32()) << "draw " << i;
    same_as_other_seed += x == other_seed.next_u32();
    same_as_other_stream += x == other_stream.next_u32();
  }
  EXPECT_LT(same_as_other_seed, 3);
  EXPECT_LT(same_as_other_stream, 3);
}

TEST(SeededRandom, EveryStartingStateIsUsableAndDistinct) {
  std::set<uint64_t> states;
  for (uint64_t seed : {0ULL, 1ULL, 2ULL, ~0ULL}) {
    for (uint64_t cpu = 0; cpu < 64; ++cpu) {
      const uint64_t s = seeded_state(seed, cpu);
      EXPECT_NE(s, 0u) << "xorshift would stay at 0 forever";
      states.insert(s);
    }
  }
  EXPECT_EQ(states.size(), 4u * 64u) << "no two (seed, cpu) pairs share a stream";
}

TEST(SeededRandom, ChanceKeepsTheRateAndAlwaysDrawsNothing) {
  SeededRandom r(7);
  int hits = 0;
  for (int i = 0; i < 100000; ++i) hits += r.chance(percent_to_prob(30));
  EXPECT_NEAR(hits / 100000.0, 0.30, 0.01);
  SeededRandom x(7), y(7);
  EXPECT_TRUE(x.chance(0xFFFFFFFFU));
  EXPECT_EQ(x.next_u32(), y.next_u32()) << "an 'always' decision consumes no draw, as in the kernel";
  EXPECT_NE(draw_seed(), draw_seed());
}

}  // namespace
}  // namespace faultline
