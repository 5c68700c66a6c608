// A host resource fault as the operator asked for it: process, cpu, memory or disk.
#pragma once

#include <csignal>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

enum class ResourceKind : uint8_t { Process, Cpu, Memory, Disk };
enum class ProcessAction : uint8_t { Freeze, Kill };

[[nodiscard]] const char* resource_kind_name(ResourceKind k);
[[nodiscard]] std::optional<ResourceKind> resource_kind_from_name(const std::string& s);
[[nodiscard]] bool is_resource_kind(const std::string& s);

// Server-style caps for resource faults, the same wherever a fault comes from.
struct ResourceCaps {
  static constexpr uint64_t kMaxDurationNs = 3600ULL * 1'000'000'000ULL;
  static constexpr uint64_t kMinDurationNs = 1'000'000'000ULL;
  static constexpr uint64_t kDefaultMinFreeBytes = 256ULL << 20;
  static constexpr uint64_t kMinMinFreeBytes = 1ULL << 20;
  static constexpr size_t kMaxProcessTargets = 64;  // more than this from one --name needs --force
  static constexpr uint64_t kMaxPid = 4'194'304;    // PID_MAX_LIMIT
  static constexpr uint64_t kMaxCores = 4096;
};

// The kind-specific flags ("pid", "min-free", ...), and whether a kind takes one.
[[nodiscard]] const std::vector<std::string>& resource_specific_flags();
[[nodiscard]] bool resource_kind_takes(ResourceKind k, const std::string& flag);

struct ResourceSpec {
  ResourceKind kind = ResourceKind::Cpu;
  uint64_t duration_ns = 0;

  // process: exactly one of pid, name, cgroup
  std::optional<int> pid;
  std::string name;    // regular expression, matched whole against comm and argv[0]'s basename
  std::string cgroup;  // process: the target; cpu: where the workers run (cgroup v2, as given)
  ProcessAction action = ProcessAction::Freeze;
  int signal = SIGKILL;
  bool force = false;  // allow PID 1, faultctl's own ancestors, kernel threads, many matches

  // cpu
  unsigned cores = 0;
  double load = 100;  // percent duty cycle of each worker

  // memory (bytes), and disk --size
  uint64_t size_bytes = 0;

  // disk
  std::string path;
  std::optional<double> fill_percent;
  uint64_t min_free_bytes = ResourceCaps::kDefaultMinFreeBytes;

  [[nodiscard]] nlohmann::json to_json() const;
  [[nodiscard]] std::string summary() const;  // one line for people
};

// The checks that need nothing from the running system, naming the flag.
[[nodiscard]] Status validate(const ResourceSpec& spec);

// Sizes are parsed by parse_size_bytes (units.h: MB = 10^6, MiB = 2^20) and
// printed in binary units with IEC names ("1.5GiB").
[[nodiscard]] std::string format_bytes(uint64_t bytes);

// "KILL", "SIGKILL", "kill", "9". Only signals that make sense to send to a service.
[[nodiscard]] Result<int> parse_signal(const std::string& s);
[[nodiscard]] std::string signal_name(int sig);

}  // namespace faultline
