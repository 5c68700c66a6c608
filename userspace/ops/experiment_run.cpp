// Experiment -> PacketRun, SyscallRun, TcpRun or ResourceRun.
#include "userspace/ops/experiment_run.h"

#include "userspace/faults/packet/run.h"
#include "userspace/faults/resource/run.h"
#include "userspace/faults/stream/run.h"
#include "userspace/faults/syscall/run.h"

namespace faultline {

Result<PlannedExperiment> plan_experiment(const Experiment& e, const std::string& record_dir, std::ostream& warnings) {
  PlannedExperiment out;
  if (const auto* packet = std::get_if<FaultSpec>(&e.fault)) {
    auto f = PacketRun::plan(*packet, AttachMode::Auto);
    if (!f) return f.error();
    out.fault = std::move(*f);
  } else if (const auto* sc = std::get_if<SyscallFaultSpec>(&e.fault)) {
    auto f = SyscallRun::plan(*sc, warnings);
    if (!f) return f.error();
    out.fault = std::move(*f);
  } else if (const auto* tc = std::get_if<TcpFaultSpec>(&e.fault)) {
    auto t = std::make_unique<TcpRun>(*tc, warnings);
    out.tcp = t.get();
    out.fault = std::move(t);
  } else if (const auto* rs = std::get_if<ResourceSpec>(&e.fault)) {
    auto f = ResourceRun::plan(*rs);
    if (!f) return f.error();
    if (e.record) (*f)->set_record_dir(record_dir);
    out.fault = std::move(*f);
  }
  if (!out.fault) return input_error(EINVAL, "an experiment without a fault");
  return out;
}

}  // namespace faultline
