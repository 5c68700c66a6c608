// The checks of a TCP stream fault (`faultctl run tcp`) that need nothing from
// the running system: duration and drain caps, the toxics (their count and
// names), one scope. One place for the CLI, faultcp and faultd; errors name
// the flag.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/faults/stream/spec.h"

namespace faultline {

struct StreamCaps {
  static constexpr uint64_t kMaxDurationNs = 3600ULL * 1'000'000'000ULL;  // 1h
  static constexpr uint64_t kMinDurationNs = 100'000'000ULL;              // 100ms
  static constexpr uint64_t kMaxDrainNs = 600ULL * 1'000'000'000ULL;      // 10m
  static constexpr size_t kMaxToxics = 16;
};

// Each --toxic text ("latency=200ms,jitter=20ms") parsed with the defaults of
// --direction and --toxicity; the second toxic of one type and stream is named
// "<type>_<stream>_2". At most StreamCaps::kMaxToxics.
[[nodiscard]] Result<std::vector<Toxic>> parse_toxics(const std::vector<std::string>& texts, Stream default_stream,
                                                      double default_toxicity);

[[nodiscard]] Status validate(const TcpFaultSpec& spec);

}  // namespace faultline
