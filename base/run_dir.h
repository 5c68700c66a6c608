// The state folder every part of Faultline keeps its runtime files in.
#pragma once

#include <string>

namespace faultline {

// FAULTLINE_RUN_DIR when set, else /run/faultline; no trailing slash. Every
// record of a running fault, guard or session lives below it, and the kernel
// feature probes of this boot (loader/feature_cache.h).
[[nodiscard]] std::string state_root();

}  // namespace faultline
