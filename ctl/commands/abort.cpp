// faultctl abort ID|--all: end one fault or release one guard; --all is the kill switch.
#include <iostream>

#include "base/exit_code.h"
#include "ctl/commands.h"
#include "ctl/resource_state.h"
#include "ctl/session_state.h"
#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/state/session_registry.h"

namespace faultline {

int cmd_abort(const std::vector<std::string>& args) {
  NetfaultEngine engine;
  if (args.size() != 1) {
    std::cerr << "faultctl abort: give one fault ID (see faultctl status) or --all\n";
    return kExitBadInput;
  }
  if (args[0] == "--all") {
    // Resource faults first: their revert needs no kernel state and must not wait on it.
    auto res = abort_all_resource_faults();
    if (!res) {
      std::cerr << "faultctl abort: " << res.error().describe() << "\n";
      return kExitFailure;
    }
    if (*res > 0) std::cout << *res << " resource fault" << (*res == 1 ? "" : "s") << " reverted\n";
    if (auto n = abort_all_syscall_faults(std::cout); !n) {
      std::cerr << "faultctl abort: " << n.error().describe() << "\n";
      return kExitFailure;
    }
    if (auto st = engine.abort_all(); !st) {
      std::cerr << "faultctl abort: " << st.error().describe() << "\n";
      return kExitFailure;
    }
    std::cout << "all faults ended (kill switch) and Faultline removed from every device\n";
    return kExitCompleted;
  }
  const std::string& id = args[0];
  if (is_resource_fault_id(id)) return abort_resource_fault(id);
  if (is_session_id(id)) return abort_session_command(id);
  if (id.empty() || id.size() > 6 || id.find_first_not_of("0123456789") != std::string::npos) {
    std::cerr << "faultctl abort: '" << id
              << "' is not a fault ID (a number, rN, sN or gN from faultctl status) or --all\n";
    return kExitBadInput;
  }
  uint32_t slot = static_cast<uint32_t>(std::stoul(id));
  auto maps = PinnedMaps::open(engine.layout(), false);
  if (!maps || !FaultTable(*maps).exists(slot)) {
    std::cerr << "faultctl abort: no active fault " << id << "\n";
    return kExitBadInput;
  }
  // Deactivate first: the fault stops at this instant, cleanup follows.
  (void)FaultTable(*maps).deactivate(slot);
  if (auto st = engine.end(slot); !st) {
    std::cerr << "faultctl abort: fault " << id << " stopped, but cleanup failed: " << st.error().describe() << "\n";
    return kExitFailure;
  }
  std::cout << "fault " << id << " ended\n";
  return kExitCompleted;
}

}  // namespace faultline
