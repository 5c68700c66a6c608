// The clocks Faultline reads, each for one reason, and the one way it sleeps.
#pragma once

#include <cstdint>
#include <string>

namespace faultline {

// CLOCK_BOOTTIME: the clock fault expiry uses in the kernel and in state files
// (it keeps counting through suspend, so a fault cannot outlive its duration).
[[nodiscard]] uint64_t boottime_ns();

// CLOCK_MONOTONIC: intervals measured by this process (probe latency, rates).
[[nodiscard]] uint64_t monotonic_ns();

// CLOCK_MONOTONIC_COARSE: the clock the sockaddr programs stamp flows with.
[[nodiscard]] uint64_t coarse_monotonic_ns();

// CLOCK_REALTIME seconds, for records and people.
[[nodiscard]] double wall_seconds();
[[nodiscard]] std::string iso8601(double wall_s);

// Sleeps up to ms; a signal cuts it short, which is what every run loop wants.
void sleep_ms(int ms);

}  // namespace faultline
