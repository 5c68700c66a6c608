// One guarded experiment: apply a fault, watch it and the guardrail, end it on time.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>

#include "loader/attachments.h"
#include "userspace/faults/fault_spec.h"
#include "userspace/faults/netfault_engine.h"
#include "userspace/faults/record.h"
#include "userspace/guardrails/health_probe.h"
#include "userspace/guardrails/kernel_signal.h"

namespace faultline {

// Exit codes of `faultctl run`, also the documented contract for CI gates.
enum ExitCode : int {
  kExitCompleted = 0,
  kExitFailure = 1,       // could not apply, interrupted, or aborted from outside
  kExitBadInput = 2,
  kExitGuardrail = 7,     // aborted because the guardrail was breached (or the steady state was outside it)
  kExitRefuted = 8,       // ran to the end, and the recorded hypothesis (--slo) was refuted
};

struct ExperimentOptions {
  FaultSpec spec;
  AttachMode attach = AttachMode::Auto;
  std::optional<HealthProbeConfig> health;
  std::optional<KernelSignalConfig> kernel_signal;  // netns_ino is filled in from the plan
  std::optional<RecordOptions> record;               // --steady-state, --hypothesis, --record, --slo
  bool json = false;
  bool dry_run = false;
};

class Experiment {
 public:
  Experiment(ExperimentOptions opts, std::ostream& out, std::ostream& err)
      : opts_(std::move(opts)), out_(out), err_(err) {}

  // Runs to the end and returns the exit code. SIGINT/SIGTERM end the fault first.
  [[nodiscard]] int run();

 private:
  void emit(const nlohmann::json& event);
  ExperimentOptions opts_;
  std::ostream& out_;
  std::ostream& err_;
};

}  // namespace faultline
