// Parsing operator-facing values: durations, percents, rates, ports, addresses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"

namespace faultline {

// "30s", "500ms", "2m", "1h", "1.5s", "250us". A bare number is refused (no unit).
[[nodiscard]] Result<uint64_t> parse_duration_ns(const std::string& s);
[[nodiscard]] std::string format_duration(uint64_t ns);

// "30", "30%", "0.5". Range 0..100.
[[nodiscard]] Result<double> parse_percent(const std::string& s);

// "10mbit", "1gbit", "500kbit", "64000bit", "10mbps" (bytes) -> bits per second.
// The rates parse_rate_bps() takes, in bits per second.
inline constexpr uint64_t kMinRateBps = 8'000;
inline constexpr uint64_t kMaxRateBps = 400'000'000'000;
[[nodiscard]] Result<uint64_t> parse_rate_bps(const std::string& s);

// "10MB", "512KiB", "2GB", "4096" (bytes). KB/MB/GB are powers of 1000,
// KiB/MiB/GiB of 1024; B or no unit means bytes.
[[nodiscard]] Result<uint64_t> parse_size_bytes(const std::string& s);

// A probability in percent to the 2^32-1 scale the programs compare against.
[[nodiscard]] uint32_t percent_to_prob(double percent);

struct PortRange {
  uint16_t lo = 0;
  uint16_t hi = 0;
};
// "80" or "8000-8100".
[[nodiscard]] Result<PortRange> parse_port_range(const std::string& s);

}  // namespace faultline
