// A packet fault as the guarded run sees it: planned on construction, applied
// through the NetfaultEngine, ended by removing its entry.
#pragma once

#include <memory>
#include <optional>

#include "loader/netfault_attachments.h"
#include "loader/netfault_maps.h"
#include "userspace/faults/packet/fault_table.h"
#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/faults/packet/spec.h"
#include "userspace/run/runnable_fault.h"

namespace faultline {

class PacketRun final : public RunnableFault {
 public:
  // Resolves the namespace, devices and cgroup and compiles the entry; touches
  // nothing. Input the system cannot satisfy is a bad-input error.
  [[nodiscard]] static Result<std::unique_ptr<PacketRun>> plan(const FaultSpec& spec, AttachMode attach);

  [[nodiscard]] std::string summary() const override { return plan_.spec.summary(); }
  [[nodiscard]] nlohmann::json plan() const override { return plan_.to_json(); }
  [[nodiscard]] std::string dry_run_text() const override;
  [[nodiscard]] uint32_t netns_inode() const override { return plan_.netns.inode; }
  [[nodiscard]] Result<FaultStart> apply() override;
  [[nodiscard]] std::optional<FaultEnding> check() override;
  [[nodiscard]] FaultObservation observe() override;
  [[nodiscard]] Status end(std::string_view reason) override;
  [[nodiscard]] std::optional<std::string> touched_nothing() const override;

 private:
  explicit PacketRun(FaultPlan plan) : plan_(std::move(plan)) {}
  [[nodiscard]] fl_fault_stats stats() const;
  [[nodiscard]] fl_budget budget() const;

  NetfaultEngine engine_;
  FaultPlan plan_;
  std::optional<AppliedFault> applied_;
  std::optional<NetfaultMaps> maps_;
  std::optional<FaultTable> table_;
  std::optional<fl_fault_stats> final_stats_;  // kept when the entry goes
  std::optional<fl_budget> final_budget_;
};

}  // namespace faultline
