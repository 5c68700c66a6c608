// One guarded resource-fault experiment: state and reaper first, then apply, watch, revert on time.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "userspace/faults/record.h"
#include "userspace/faults/resource_spec.h"
#include "userspace/guardrails/health_probe.h"
#include "userspace/guardrails/kernel_signal.h"

namespace faultline {

struct ResourceRunOptions {
  ResourceSpec spec;
  std::optional<HealthProbeConfig> health;
  std::optional<KernelSignalConfig> kernel_signal;  // counted in the host's network namespace
  std::optional<RecordOptions> record;
  bool json = false;
  bool dry_run = false;
};

// The same contract as the packet Experiment (exit codes 0/1/2/7/8, JSON lines,
// SIGINT/SIGTERM end the fault first), plus what userspace faults need because
// the kernel will not end them: the state is written and a reaper is running
// before the first change, and every change is journalled before it is made.
class ResourceExperiment {
 public:
  ResourceExperiment(ResourceRunOptions opts, std::ostream& out, std::ostream& err)
      : opts_(std::move(opts)), out_(out), err_(err) {}

  [[nodiscard]] int run();

 private:
  void emit(const nlohmann::json& event);
  ResourceRunOptions opts_;
  std::ostream& out_;
  std::ostream& err_;
};

}  // namespace faultline
