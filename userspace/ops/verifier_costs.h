// What the verifier spends on every program Faultline loads, on this kernel:
// each BPF object loaded once in each configuration Faultline uses, its
// programs' verified instructions as a share of the verifier's limit
// (faultctl features --verifier-cost, the budget test, the kernel report).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "loader/verifier_cost.h"

namespace faultline {

// One BPF object in one configuration: its programs' costs, or why it did
// not load here (a hook this kernel lacks: BPF LSM without trampolines, no
// kprobe override; or the verifier refusing it).
struct ObjectCost {
  std::string config;  // "sockaddr (applied policy)"
  bool loaded = false;
  std::string error;  // when not loaded
  std::vector<ProgramCost> programs;
};

// The budget every program keeps on every kernel (docs/kernel-support.md):
// a quarter of the limit. The test in make test fails at half of it.
inline constexpr double kVerifierBudgetShare = 0.25;

// Loads each object (netfault, sockaddr as a guard's and as an applied
// policy's instance, signals, syscall_lsm, syscall_override) and records its
// costs. Needs root. Leaves nothing behind: the objects are closed, the
// throw-away pin folder removed, nothing attached but the signals
// tracepoints, detached again on return.
[[nodiscard]] std::vector<ObjectCost> measure_verifier_costs();

// The table (or one JSON document): object, program, verified instructions,
// share of the limit, verification time. Returns the exit code: 0, or 1 when
// a program passed kVerifierBudgetShare or an object expected to load here did
// not (its line says so).
[[nodiscard]] int write_verifier_costs(bool json, std::ostream& out);

}  // namespace faultline
