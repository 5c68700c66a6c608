// faultctl uninstall: nothing of Faultline stays behind, except running guards, which it names.
#include <chrono>
#include <iostream>
#include <thread>

#include "base/exit_code.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/ops/resource_state.h"
#include "userspace/ops/session_state.h"
#include "userspace/policy/policy_apply.h"

namespace faultline {
namespace {

constexpr const char* kUninstallUsage =
    "usage: faultctl uninstall\n"
    "  remove every program, link, filter, qdisc and pin of Faultline (the applied\n"
    "  egress policy too) and revert every resource fault; running guards are named\n"
    "  and left alone; with FAULTLINE_BPFFS_ROOT (a private layout), its lock\n"
    "  files under /run too\n";

constexpr Example kUninstallExamples[] = {
    {"leave nothing of Faultline behind", "faultctl uninstall"},
};

int uninstall() {
  // Host resource faults are Faultline's too: nothing of ours stays behind.
  if (auto res = abort_all_resource_faults(); !res) {
    std::cerr << "faultctl uninstall: " << res.error().describe() << "\n";
    return kExitFailure;
  } else if (*res > 0) {
    std::cout << *res << " resource fault" << (*res == 1 ? "" : "s") << " reverted\n";
  }
  if (auto n = abort_all_session_faults(std::cout); !n) {
    std::cerr << "faultctl uninstall: " << n.error().describe() << "\n";
    return kExitFailure;
  }
  // The applied policy is pinned state of ours like the rest.
  if (auto removed = delete_policy(bpffs_layout(), false); !removed) {
    std::cerr << "faultctl uninstall: " << removed.error().describe() << "\n";
    return kExitFailure;
  } else if (removed->changed) {
    std::cout << "applied egress policy removed (" << removed->changes.size() << " scope"
              << (removed->changes.size() == 1 ? "" : "s") << ")\n";
  }
  // The programs to see gone: on the host's layout, every netfault program (it
  // sweeps those of lost pins too); on a private one (a test's, a bench's), only
  // those of its own state, whose fl_control map is its own: a neighbour's stay.
  const BpffsLayout layout = bpffs_layout();
  const bool private_layout = layout.root != BpffsLayout{}.root;
  const std::optional<uint32_t> own_control = private_layout ? pinned_control_map_id(layout) : std::nullopt;
  auto programs_left = [&] {
    if (!private_layout) return count_netfault_progs();
    return own_control ? count_netfault_progs(own_control) : 0;
  };
  NetfaultEngine engine;
  if (auto st = engine.uninstall(); !st) {
    std::cerr << "faultctl uninstall: " << st.error().describe() << "\n";
    return kExitFailure;
  }
  // A removed tc filter lets go of its program only after an RCU grace period,
  // so a program can still be listed for a moment: give the kernel up to 2 s.
  int left = programs_left();
  for (int i = 0; i < 40 && left > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = programs_left();
  }
  if (left > 0) {
    std::cerr << "faultctl uninstall: " << left << " netfault programs are still loaded (held by another process?)\n";
    return kExitFailure;
  }
  // A guard is enforcement its operator started around a command: uninstall
  // does not lift it behind their back, but says it is there.
  auto guards = live_guard_lines();
  if (!guards.empty()) {
    std::cout << "Faultline uninstalled, except " << guards.size() << " running guard"
              << (guards.size() == 1 ? "" : "s")
              << " whose programs go when the command ends (or with faultctl abort ID):\n";
    for (const auto& g : guards) std::cout << "  " << g << "\n";
    return kExitCompleted;
  }
  // A private layout (FAULTLINE_BPFFS_ROOT: a test's, a bench's) is gone for
  // good: its lock files under /run go with it. The host's stay, as a waiter
  // on a removed lock file would hold a lock nobody else sees.
  if (private_layout) remove_layout_locks(layout);
  std::cout << "Faultline uninstalled: no programs, links, filters or pins remain\n";
  return kExitCompleted;
}

}  // namespace

int cmd_uninstall(const std::vector<std::string>& args) {
  return run_command("faultctl uninstall", parse_switches(args, {}, with_examples(kUninstallUsage, kUninstallExamples)),
                     kRootNever, [](const Switches&) { return uninstall(); });
}

}  // namespace faultline
