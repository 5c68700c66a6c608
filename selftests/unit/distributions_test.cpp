// Jitter tables: zero mean, the documented spread, a long tail for pareto.
#include "userspace/faults/packet/distributions.h"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline {
namespace {

struct Moments {
  double mean, sd, max;
};

Moments moments(const fl_dist_table& t) {
  double sum = 0, sq = 0, mx = -1e9;
  for (int16_t v : t.v) {
    double x = v / double(1 << FL_DIST_SHIFT);
    sum += x;
    sq += x * x;
    mx = std::max(mx, x);
  }
  double mean = sum / FL_DIST_SIZE;
  return {mean, std::sqrt(sq / FL_DIST_SIZE - mean * mean), mx};
}

TEST(Distributions, UniformSpansPlusMinusOne) {
  auto m = moments(make_dist_table(FL_DIST_UNIFORM));
  EXPECT_NEAR(m.mean, 0, 0.01);
  EXPECT_NEAR(m.sd, 1 / std::sqrt(3.0), 0.01);
  EXPECT_LE(m.max, 1.0);
}

TEST(Distributions, NormalHasSigmaOne) {
  auto m = moments(make_dist_table(FL_DIST_NORMAL));
  EXPECT_NEAR(m.mean, 0, 0.01);
  EXPECT_NEAR(m.sd, 1, 0.03);
}

TEST(Distributions, ParetoIsSkewedRight) {
  auto m = moments(make_dist_table(FL_DIST_PARETO));
  EXPECT_NEAR(m.mean, 0, 0.05);
  EXPECT_GT(m.max, 5) << "the tail reaches far above the mean";
}

}  // namespace
}  // namespace faultline
