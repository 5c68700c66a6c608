// Ending faults by ID, or all of them: resource faults first (their revert needs
// no kernel state), then syscall faults, then the packet engine's kill switch.
#include "userspace/ops/abort_faults.h"

#include <ostream>

#include "base/exit_code.h"
#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/ops/resource_state.h"
#include "userspace/ops/session_state.h"
#include "userspace/state/session_registry.h"

namespace faultline {
namespace {

bool is_packet_fault_id(const std::string& id) {
  return !id.empty() && id.size() <= 6 && id.find_first_not_of("0123456789") == std::string::npos;
}

int abort_packet_fault(const std::string& id, std::ostream& out, std::ostream& err) {
  NetfaultEngine engine;
  uint32_t slot = static_cast<uint32_t>(std::stoul(id));
  auto maps = NetfaultMaps::open(engine.layout(), false);
  if (!maps || !FaultTable(*maps).exists(slot)) {
    err << "faultctl abort: no active fault " << id << "\n";
    return kExitBadInput;
  }
  // Deactivate first: the fault stops at this instant, cleanup follows.
  (void)FaultTable(*maps).deactivate(slot);
  if (auto st = engine.end(slot); !st) {
    err << "faultctl abort: fault " << id << " stopped, but cleanup failed: " << st.error().describe() << "\n";
    return kExitFailure;
  }
  out << "fault " << id << " ended\n";
  return kExitCompleted;
}

}  // namespace

bool is_fault_id(const std::string& id) {
  return is_packet_fault_id(id) || is_resource_fault_id(id) || is_session_id(id);
}

int abort_fault(const std::string& id, std::ostream& out, std::ostream& err) {
  if (is_resource_fault_id(id)) return abort_resource_fault(id, out, err);
  if (is_session_id(id)) return abort_session_command(id, out, err);
  if (is_packet_fault_id(id)) return abort_packet_fault(id, out, err);
  err << "faultctl abort: '" << id << "' is not a fault ID (a number, rN, sN or gN from faultctl status) or --all\n";
  return kExitBadInput;
}

int abort_all_faults(std::ostream& out, std::ostream& err) {
  auto res = abort_all_resource_faults();
  if (!res) {
    err << "faultctl abort: " << res.error().describe() << "\n";
    return kExitFailure;
  }
  if (*res > 0) out << *res << " resource fault" << (*res == 1 ? "" : "s") << " reverted\n";
  if (auto n = abort_all_session_faults(out); !n) {
    err << "faultctl abort: " << n.error().describe() << "\n";
    return kExitFailure;
  }
  NetfaultEngine engine;
  if (auto st = engine.abort_all(); !st) {
    err << "faultctl abort: " << st.error().describe() << "\n";
    return kExitFailure;
  }
  out << "all faults ended (kill switch) and Faultline removed from every device\n";
  return kExitCompleted;
}

}  // namespace faultline
