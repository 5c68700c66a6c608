// What the verifier spends on each program Faultline loads: while a
// VerifierCostRecorder lives, every BpfSkeleton load in this process records
// its programs' verified instructions and verification time (faultctl
// features --verifier-cost, the budget test, the kernel report).
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace faultline {

// The verifier's complexity limit (BPF_COMPLEXITY_LIMIT_INSNS, the same on
// every kernel since 5.2): a program that makes the verifier process more
// instructions than this does not load.
inline constexpr uint64_t kVerifierInsnLimit = 1'000'000;

struct ProgramCost {
  std::string object;   // the skeleton's name: "sockaddr", "netfault", ...
  std::string program;  // its SEC() function: "fl_dns_ingress"
  // Instructions the verifier processed: bpf_prog_info.verified_insns (5.16+),
  // else the "processed N insns" line of the verifier's statistics.
  uint64_t verified_insns = 0;
  uint64_t verify_us = 0;  // the statistics' "verification time", 0 when not given
  [[nodiscard]] double share_of_limit() const { return double(verified_insns) / double(kVerifierInsnLimit); }
};

class VerifierCostRecorder {
 public:
  // One at a time, in one thread: loads in this thread are recorded until it is destroyed.
  VerifierCostRecorder();
  ~VerifierCostRecorder();
  VerifierCostRecorder(const VerifierCostRecorder&) = delete;
  VerifierCostRecorder& operator=(const VerifierCostRecorder&) = delete;

  [[nodiscard]] const std::vector<ProgramCost>& costs() const { return costs_; }

  // The hooks BpfSkeleton::load calls; no-ops while no recorder lives.
  static void before_load(bpf_object* obj);
  static void after_load(bpf_object* obj, const std::string& object_name, int err);

 private:
  std::vector<ProgramCost> costs_;
  // One statistics buffer per program being loaded (libbpf keeps the pointer).
  std::vector<std::unique_ptr<char[]>> logs_;
};

}  // namespace faultline
