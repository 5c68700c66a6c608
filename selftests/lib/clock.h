// The clock tests time things with: CLOCK_MONOTONIC, also the clock of
// bpf_ktime_get_ns() and of the timestamps faultctl prints.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace fltest {

[[nodiscard]] inline uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// A test whose runs must share one budget window (windows aligned to the
// epoch, as the guard's are) starts clear of the window's end: if less than
// `margin` is left of the current window, it waits for the next one.
inline void wait_clear_of_window_edge(std::chrono::seconds window,
                                      std::chrono::seconds margin = std::chrono::seconds(120)) {
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  const auto left = window - now % window;
  if (left < margin) std::this_thread::sleep_for(left + std::chrono::seconds(1));
}

}  // namespace fltest
