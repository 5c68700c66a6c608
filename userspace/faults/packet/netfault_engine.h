// Packet faults end to end: scope resolution, attachment, the fault table, teardown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "loader/bpffs.h"
#include "loader/netfault_attachments.h"
#include "loader/netns.h"
#include "userspace/faults/packet/device_choice.h"
#include "userspace/faults/packet/fault_table.h"
#include "userspace/faults/packet/spec.h"

namespace faultline {

// Everything decided before touching the kernel: what --dry-run prints.
struct FaultPlan {
  FaultSpec spec;
  NetnsRef netns;
  std::vector<NetDevice> devices;
  // How the devices were chosen: "--dev", "routes" (one lookup per target), or
  // "every non-loopback Ethernet device" (no target to look up).
  std::string device_choice;
  std::vector<TargetRoute> routes;  // with "routes": where each target goes
  uint64_t cgroup_id = 0;
  AttachMode requested = AttachMode::Auto;
  std::string mechanism;  // "tcx" or "tc clsact + cls_bpf"
  CompiledFault compiled;

  [[nodiscard]] nlohmann::json to_json() const;
};

struct AppliedFault {
  uint32_t slot = 0;
  uint64_t expires_ns = 0;  // CLOCK_BOOTTIME
  std::string attach_mode;
};

// The kernel entry and index keys for a validated spec (expires_ns left 0).
// ifindex 0 means every attached device of the namespace.
[[nodiscard]] CompiledFault compile_fault(const FaultSpec& spec, uint32_t netns_ino, uint32_t ifindex,
                                          uint64_t cgroup_id);

class NetfaultEngine {
 public:
  explicit NetfaultEngine(BpffsLayout layout = bpffs_layout()) : layout_(std::move(layout)) {}

  // Resolves the namespace, devices and cgroup, checks the kernel can do it, and
  // compiles the entry. Touches nothing. Errors here are bad input or missing features.
  [[nodiscard]] Result<FaultPlan> plan(const FaultSpec& spec, AttachMode mode) const;

  // Installs what is missing (maps, programs on the devices), then adds the fault.
  [[nodiscard]] Result<AppliedFault> apply(const FaultPlan& plan, uint32_t owner_pid);

  // Removes one fault now; tears everything down when it was the last (unless
  // this process keeps an idle state: keep_idle_state()).
  [[nodiscard]] Status end(uint32_t slot);

  // Kill switch first (every program passes at once), then removes all faults.
  [[nodiscard]] Status abort_all();

  // Removes faults that expired (their owner died or is late); tears down when idle.
  [[nodiscard]] Result<int> reap();

  // Removes every program, link, filter, qdisc and pin of ours, found by record
  // and by asking the kernel. From the default root it also removes netfault
  // programs of any other state (lost pins, or a FAULTLINE_BPFFS_ROOT install).
  [[nodiscard]] Status uninstall();

  [[nodiscard]] const BpffsLayout& layout() const { return layout_; }

  // A resident process (faultd, which runs faults for faultctl) keeps the
  // maps and the attachments its runs made when the last fault ends, so its
  // next run skips loading, verifying and attaching the programs. Any other
  // process's end or reap still tears an idle state down, as do abort_all()
  // and uninstall(); a resident that stops calls reap() with this off.
  // It also keeps the pinned maps open between calls (NetfaultMaps::keep_open).
  static void keep_idle_state(bool keep);

  // For a resident process, at its start: the maps (created and armed when
  // missing) and this namespace's programs loaded and verified now, so that its
  // first run attaches them instead (loader/netfault_attachments.h). The
  // milliseconds it took, or why not (then the first run loads them).
  [[nodiscard]] Result<uint64_t> prepare_host();

 private:
  // Under the state lock: the maps, created, armed and swept of orphans when
  // they were missing.
  [[nodiscard]] Result<NetfaultMaps> open_maps_locked();
  [[nodiscard]] Status teardown_locked(NetfaultMaps& maps, bool foreign_too = false);
  // Removes expired and orphaned faults; returns how many.
  [[nodiscard]] Result<int> reap_locked(NetfaultMaps& maps);
  BpffsLayout layout_;
};

// Arms maps that were just created (every index empty): the control, its index
// bits, the jitter tables. Indexes filled another way need summarise_indexes().
[[nodiscard]] Status initialise_maps(const NetfaultMaps& maps);

}  // namespace faultline
