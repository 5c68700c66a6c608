// A syscall fault as the guarded run sees it: the rung the plan chose, armed
// until the fault's end, registered as a session so that status lists it and
// abort (and the kill switch) reach it.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>

#include "userspace/faults/syscall/plan.h"
#include "userspace/faults/syscall/rung.h"
#include "userspace/run/runnable_fault.h"
#include "userspace/state/session_registry.h"

namespace faultline {

class SyscallRun final : public RunnableFault {
 public:
  // The ladder decides the rung; nothing is touched. warn gets the line that
  // says why a fault could not be registered (it still runs).
  [[nodiscard]] static Result<std::unique_ptr<SyscallRun>> plan(const SyscallFaultSpec& spec, std::ostream& warn);

  [[nodiscard]] std::string summary() const override { return spec_.describe(); }
  [[nodiscard]] nlohmann::json plan() const override;
  // {"seed", "seed_source"} when the run is seeded; empty otherwise.
  [[nodiscard]] nlohmann::json seed_json() const;
  [[nodiscard]] std::string dry_run_text() const override;
  [[nodiscard]] uint32_t netns_inode() const override;
  [[nodiscard]] Result<FaultStart> apply() override;
  [[nodiscard]] std::optional<FaultEnding> check() override;
  [[nodiscard]] FaultObservation observe() override;
  [[nodiscard]] Status end(std::string_view reason) override;
  bool forward_signal(int sig) override;
  [[nodiscard]] bool wraps_command() const override { return !spec_.command.empty(); }

 private:
  SyscallRun(SyscallFaultSpec spec, SyscallPlan plan, std::ostream& warn)
      : spec_(std::move(spec)), plan_(std::move(plan)), warn_(warn) {}

  SyscallFaultSpec spec_;
  SyscallPlan plan_;
  std::ostream& warn_;
  std::unique_ptr<SyscallRung> rung_;
  std::optional<HeldChild> child_;
  std::optional<SessionOwner> session_;
  bool ended_ = false;
};

}  // namespace faultline
