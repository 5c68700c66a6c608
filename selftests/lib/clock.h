// The clock tests time things with: CLOCK_MONOTONIC, also the clock of
// bpf_ktime_get_ns() and of the timestamps faultctl prints.
#pragma once

#include <time.h>

#include <cstdint>

namespace fltest {

[[nodiscard]] inline uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace fltest
