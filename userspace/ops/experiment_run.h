// A typed experiment's run, planned as `faultctl run` plans its kind (nothing
// touched yet): the one step from an Experiment to the RunnableFault that
// guarded_run() runs, shared by faultd's dispatched experiments and
// `faultctl scenario run`.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "base/result.h"
#include "userspace/ops/experiment.h"
#include "userspace/run/runnable_fault.h"

namespace faultline {

class TcpRun;

struct PlannedExperiment {
  std::unique_ptr<RunnableFault> fault;
  TcpRun* tcp = nullptr;  // a tcp or http run, whose connections may drain after the record
};

// record_dir: where a resource fault's record goes (with a hypothesis). A
// syscall or tcp fault's "not registered" line goes to warnings.
[[nodiscard]] Result<PlannedExperiment> plan_experiment(const Experiment& e, const std::string& record_dir,
                                                        std::ostream& warnings);

}  // namespace faultline
