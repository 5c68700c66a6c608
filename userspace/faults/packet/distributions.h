// Jitter distributions as inverse-CDF tables the BPF program samples at random.
#pragma once

#include <cstdint>

#include "faultline/abi.h"

namespace faultline {

// Table for one distribution: zero mean, one jitter unit = 1 << FL_DIST_SHIFT.
// uniform spans [-1, 1] units; normal has sigma 1; pareto (alpha 3) is shifted to
// mean 0 and scaled to sigma 1, so its long tail adds delay and rarely removes it.
[[nodiscard]] fl_dist_table make_dist_table(uint32_t dist);

}  // namespace faultline
