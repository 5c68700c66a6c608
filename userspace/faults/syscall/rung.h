// One rung of the syscall fault ladder: a mechanism that makes syscalls fail.
// SyscallRun drives whichever rung the plan chose; each rung is one file.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/child.h"
#include "base/result.h"
#include "faultline/abi.h"
#include "userspace/faults/syscall/plan.h"

namespace faultline {

struct RungStart {
  std::string scope;        // "command curl", "pid 42", "cgroup /app"
  std::string how;          // "cgroup socket hooks", "BPF LSM: file_open", "seccomp user notification"
  uint64_t expires_ns = 0;  // CLOCK_BOOTTIME: the duration counts from the moment the rung is armed
  int policy_fd = -1;       // the kernel policy holding `armed` (status, abort); -1: none
  int stats_fd = -1;        // its per-CPU counters; -1: counts() only
  nlohmann::json event = nlohmann::json::object();  // extra fields of the started line
  std::optional<HeldChild> child;                   // the wrapped command, spawned and still held
};

struct RungCounts {
  uint64_t injected = 0;
  uint64_t passed = 0;
  uint64_t cap_refused = 0;  // calls the cap let through (--max-injections)
  uint64_t reached_ns = 0;   // CLOCK_BOOTTIME when the cap was reached; 0 = not (yet)
};

// The kernel policy's brakes from the spec; start_ns counted from armed_ns.
[[nodiscard]] fl_call_budget call_budget(const SyscallFaultSpec& spec, uint64_t armed_ns);
// Counts from a kernel policy's brakes: how many calls the cap refused, and when it was reached.
void add_budget_counts(RungCounts& c, const fl_call_budget& b);

class SyscallRung {
 public:
  virtual ~SyscallRung() = default;
  // Arms the mechanism for spec.duration_ns, counted from when it is armed (a
  // BPF object can take seconds to load on a slow machine; the fault keeps its
  // whole duration) — the kernel rungs end there by themselves — and, with a
  // command, spawns it held, placed under the mechanism but not yet running:
  // the run registers its session first, then calls release().
  [[nodiscard]] virtual Result<RungStart> start(const SyscallFaultSpec& spec) = 0;
  // Lets the held command from start() go; returns once it has exec'd under
  // the mechanism (and, for seccomp, once its calls are being answered).
  [[nodiscard]] virtual Status release(HeldChild& child) = 0;
  // Stops injecting at once; a wrapped command runs on. Idempotent.
  virtual void disarm() = 0;
  [[nodiscard]] virtual RungCounts counts() const = 0;
};

[[nodiscard]] std::unique_ptr<SyscallRung> make_cgroup_rung();
[[nodiscard]] std::unique_ptr<SyscallRung> make_lsm_rung();
[[nodiscard]] std::unique_ptr<SyscallRung> make_seccomp_rung();

}  // namespace faultline
