// Inverse-CDF sampling tables, evaluated at the middle of each of FL_DIST_SIZE quantiles.
#include "userspace/faults/packet/distributions.h"

#include <algorithm>
#include <cmath>

namespace faultline {
namespace {

double normal_quantile(double q) {
  // Bisection on the CDF: exact enough for a table built once.
  double lo = -10, hi = 10;
  for (int i = 0; i < 100; ++i) {
    double mid = (lo + hi) / 2;
    double cdf = 0.5 * std::erfc(-mid / std::sqrt(2.0));
    (cdf < q ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

fl_dist_table make_dist_table(uint32_t dist) {
  fl_dist_table t{};
  const double unit = 1 << FL_DIST_SHIFT;
  for (int i = 0; i < FL_DIST_SIZE; ++i) {
    double q = (i + 0.5) / FL_DIST_SIZE;
    double v = 0;
    switch (dist) {
      case FL_DIST_UNIFORM:
        v = 2 * q - 1;
        break;
      case FL_DIST_NORMAL:
        v = normal_quantile(q);
        break;
      case FL_DIST_PARETO: {
        const double alpha = 3, mean = alpha / (alpha - 1),
                     sd = std::sqrt(alpha / ((alpha - 1) * (alpha - 1) * (alpha - 2)));
        v = (std::pow(1 - q, -1 / alpha) - mean) / sd;
        break;
      }
      default:
        v = 0;
    }
    t.v[i] = static_cast<int16_t>(std::clamp(std::lround(v * unit), -32767L, 32767L));
  }
  return t;
}

}  // namespace faultline
