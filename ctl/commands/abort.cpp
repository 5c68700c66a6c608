// faultctl abort ID|--all: end one fault or release one guard; --all is the kill switch.
#include <iostream>

#include "base/exit_code.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "ctl/resource_state.h"
#include "ctl/session_state.h"
#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/state/session_registry.h"

namespace faultline {
namespace {

constexpr const char* kUsage =
    "usage: faultctl abort ID | --all\n"
    "  ID: end one fault (N, rN or sN, see faultctl status) or release a guard (gN)\n"
    "  --all: the kill switch: end every packet and syscall fault, revert every\n"
    "  resource fault and remove Faultline from every device; guards stay\n";

constexpr Example kExamples[] = {
    {"end packet fault 3 (IDs from faultctl status)", "faultctl abort 3"},
    {"end resource fault r2: its changes are reverted", "faultctl abort r2"},
    {"release guard g1: its command runs on, unguarded", "faultctl abort g1"},
    {"the kill switch", "faultctl abort --all"},
};

// What abort ends: every fault (--all), or the fault or guard with this ID.
struct AbortArgs {
  bool all = false;
  std::string id;  // N (packet), rN (resource), sN (syscall) or gN (guard)
};

Result<Parsed<AbortArgs>> parse_abort_args(const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "-h" || args[0] == "--help"))
    return Parsed<AbortArgs>(HelpText{with_examples(kUsage, kExamples)});
  if (args.size() != 1) return bad("give one fault ID (see faultctl status) or --all");
  const std::string& id = args[0];
  if (id == "--all") return Parsed<AbortArgs>(AbortArgs{true, ""});
  const bool packet_id = !id.empty() && id.size() <= 6 && id.find_first_not_of("0123456789") == std::string::npos;
  if (!packet_id && !is_resource_fault_id(id) && !is_session_id(id))
    return bad("'" + id + "' is not a fault ID (a number, rN, sN or gN from faultctl status) or --all");
  return Parsed<AbortArgs>(AbortArgs{false, id});
}

int abort_all(NetfaultEngine& engine) {
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

int abort_packet_fault(NetfaultEngine& engine, const std::string& id) {
  uint32_t slot = static_cast<uint32_t>(std::stoul(id));
  auto maps = NetfaultMaps::open(engine.layout(), false);
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

}  // namespace

int cmd_abort(const std::vector<std::string>& args) {
  return run_command("faultctl abort", parse_abort_args(args), kRootNever, [](const AbortArgs& a) {
    NetfaultEngine engine;
    if (a.all) return abort_all(engine);
    if (is_resource_fault_id(a.id)) return abort_resource_fault(a.id);
    if (is_session_id(a.id)) return abort_session_command(a.id);
    return abort_packet_fault(engine, a.id);
  });
}

}  // namespace faultline
