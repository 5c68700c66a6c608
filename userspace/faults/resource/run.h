// A resource fault as the guarded run sees it. What the kernel does for packet
// faults (end them on time whatever happens to us) is done here by a state file
// written, and a detached reaper started, before the first change, and by a
// journal written ahead of every change.
#pragma once

#include <memory>
#include <optional>

#include "userspace/faults/resource/fault.h"
#include "userspace/faults/resource/spec.h"
#include "userspace/faults/resource/store.h"
#include "userspace/run/runnable_fault.h"

namespace faultline {

class ResourceRun final : public RunnableFault {
 public:
  // Resolves the spec against the running system; touches nothing.
  [[nodiscard]] static Result<std::unique_ptr<ResourceRun>> plan(const ResourceSpec& spec);

  [[nodiscard]] std::string summary() const override { return spec_.summary(); }
  [[nodiscard]] nlohmann::json plan() const override;
  [[nodiscard]] std::string dry_run_text() const override;
  // A host resource fault bites the host: its kernel signal counts in the
  // host's namespace.
  [[nodiscard]] uint32_t netns_inode() const override;
  [[nodiscard]] Result<FaultStart> apply() override;
  [[nodiscard]] std::optional<FaultEnding> check() override;
  [[nodiscard]] FaultObservation observe() override;
  [[nodiscard]] Status end(std::string_view reason) override;
  void describe_end(bool ended, FaultObservation& obs) const override;

  // The record folder, kept in the state so that status can point at it.
  void set_record_dir(std::string dir) { record_dir_ = std::move(dir); }

 private:
  ResourceRun(ResourceSpec spec, std::unique_ptr<ResourceFault> fault)
      : spec_(std::move(spec)), fault_(std::move(fault)) {}

  ResourceSpec spec_;
  std::unique_ptr<ResourceFault> fault_;
  std::optional<ResourceFaultStore> store_;
  ResourceFaultState state_;
  std::string record_dir_;
  bool ended_ = false;
};

}  // namespace faultline
