// The deadman of userspace faults: a detached reaper per fault, and the sweep every faultctl runs.
#pragma once

#include <string>
#include <vector>

#include "base/process.h"
#include "base/result.h"
#include "userspace/faults/resource/store.h"

namespace faultline {

// Kernel faults expire in the kernel; a frozen process or a balloon file does not.
// The reaper is forked twice with a setsid() between, so it is in its own session
// and process group and is not a child of faultctl: a kill -9 of faultctl, of its
// process group, or a closed terminal leaves it running. It sleeps until the fault
// is due (expiry plus the grace the owner gets to revert by itself; no grace once
// the owner is dead) and then reverts unconditionally. SIGTERM makes it revert at
// once, so an orderly shutdown does not leave a fault behind. Returns once the
// reaper runs; the caller records its identity in the state.
[[nodiscard]] Result<ProcessIdentity> spawn_reaper(const ResourceFaultStore& store, const std::string& id);

// What every faultctl invocation does first, so that a fault whose reaper was
// killed too is still ended: reverts faults that are overdue (or from before a
// reboot, or stuck in revert-failed) when no live reaper will, and starts a new
// reaper for a fault that lost its own before it was due. Returns one line per
// thing done, for the operator.
[[nodiscard]] std::vector<std::string> sweep_resource_faults(const ResourceFaultStore& store);

}  // namespace faultline
