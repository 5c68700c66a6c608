// A packet fault as the operator asked for it: typed, validated, printable.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/units.h"
#include "faultline/abi.h"
#include "userspace/net/address.h"

namespace faultline {

enum class FaultKind : uint8_t {
  Loss = FL_KIND_LOSS,
  Partition = FL_KIND_PARTITION,
  Flowdrop = FL_KIND_FLOWDROP,
  Corrupt = FL_KIND_CORRUPT,
  Duplicate = FL_KIND_DUPLICATE,
  Dns = FL_KIND_DNS,
  Latency = FL_KIND_LATENCY,
  Bandwidth = FL_KIND_BANDWIDTH,
};

[[nodiscard]] const char* kind_name(FaultKind k);
[[nodiscard]] std::optional<FaultKind> kind_from_name(const std::string& s);
[[nodiscard]] const std::vector<std::string>& kind_names();
[[nodiscard]] const char* dist_name(uint32_t d);
[[nodiscard]] const char* proto_name(uint8_t p);
// Whether a kind makes random decisions (and so takes --seed).
[[nodiscard]] bool kind_is_random(FaultKind k);

// Server-style caps, the same wherever a fault comes from.
struct FaultCaps {
  static constexpr uint64_t kMaxDurationNs = 3600ULL * 1'000'000'000ULL;
  static constexpr uint64_t kMaxDelayNs = 60ULL * 1'000'000'000ULL;
  static constexpr uint64_t kMaxJitterNs = 10ULL * 1'000'000'000ULL;
  static constexpr size_t kMaxDomains = 1024;
  static constexpr uint64_t kMaxInjections = 1'000'000'000ULL;
  static constexpr uint64_t kMinRateBps = faultline::kMinRateBps;  // parse_rate_bps()'s
  static constexpr uint64_t kMaxRateBps = faultline::kMaxRateBps;
};

struct GeModel {          // percents
  double p = 0;           // P(good -> bad)
  double r = 100;         // P(bad -> good)
  double loss_bad = 100;  // 1-h
  double loss_good = 0;   // 1-k
};

struct FaultSpec {
  FaultKind kind = FaultKind::Loss;
  std::string netns;  // as given; empty = the host's namespace
  std::string dev;    // empty = every non-loopback Ethernet device of the namespace
  std::vector<Prefix> targets;
  std::optional<Prefix> source;
  PortRange ports;  // remote port; 0-0 = any
  uint8_t proto = 0;
  uint8_t dir_mask = FL_DIR_EGRESS;
  std::string cgroup;  // cgroup v2 path as given
  double percent = 100;
  double correlation = 0;
  std::optional<GeModel> ge;
  std::vector<std::string> domains;  // lowercase, no trailing dot
  uint64_t duration_ns = 0;
  uint64_t delay_ns = 0;
  uint64_t jitter_ns = 0;
  uint32_t dist = FL_DIST_NORMAL;
  uint64_t rate_bps = 0;
  uint64_t max_injections = 0;  // 0 = no cap; else the fault stops injecting after this many
  uint64_t start_after_ns = 0;  // the fault is installed but inert for this long
  // The seed of the fault's generator (--seed, or drawn when not given) for a
  // kind with a random decision; none for partition, flowdrop and bandwidth.
  std::optional<uint64_t> seed;
  bool seed_drawn = false;  // drawn by faultctl rather than given
  bool force = false;

  [[nodiscard]] nlohmann::json to_json() const;
  [[nodiscard]] std::string summary() const;  // one line for people
};

// Checks the caps and the combinations that make no sense, naming the flag.
[[nodiscard]] Status validate(const FaultSpec& spec);

// "Example.COM." -> "example.com"; refuses what is not a DNS name.
[[nodiscard]] Result<std::string> normalize_domain(const std::string& s);

// Whether a kind takes a flag: the shape flags (--percent, --delay, --rate,
// --domains, ...) belong to some kinds; every other flag to all. Refused:
// "--rate does not apply to a loss fault".
[[nodiscard]] Status check_kind_takes(FaultKind kind, const std::string& flag);

// A device name (--dev): 1-15 characters, no '/'; a namespace (--netns): a
// name, a path or pid:N of 1-255 characters, no "..". Errors name the flag.
[[nodiscard]] Status check_dev_name(const std::string& dev);
[[nodiscard]] Status check_netns_name(const std::string& netns);

// The words of the scope and shape flags, read the same way by `faultctl run`
// and by an experiment's reader; errors name the flag ("--proto 'x': expected
// tcp, udp or icmp") and are bad input.
[[nodiscard]] Result<uint8_t> parse_proto(const std::string& s);          // tcp|udp|icmp
[[nodiscard]] Result<uint8_t> parse_direction(const std::string& s);      // egress|ingress|both -> FL_DIR_*
[[nodiscard]] const char* direction_name(uint8_t dir_mask);               // the same words back
[[nodiscard]] Result<uint32_t> parse_distribution(const std::string& s);  // normal|pareto|uniform
[[nodiscard]] Result<GeModel> parse_loss_model(const std::string& s);     // ge:p[,r[,1-h[,1-k]]]
[[nodiscard]] std::string loss_model_text(const GeModel& g);              // "ge:1,20,100,0"

}  // namespace faultline
