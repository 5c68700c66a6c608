// faultctl guard ... -- CMD: run a command in a fresh cgroup under an egress
// policy, and with --fault-* / --faults its HTTP requests through a fault
// proxy in this process (composed here: the guard may not use the proxy).
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/guard_args.h"
#include "ctl/guard_fault_proxy.h"

namespace faultline {

int cmd_guard(const std::vector<std::string>& args) {
  constexpr RootNeed root{RootNeed::When::Always, "needs root (a cgroup and cgroup BPF programs)"};
  return run_command("faultctl guard", parse_guard_args(args), root, [](GuardArgs& a) -> int {
    std::unique_ptr<GuardFaultProxy> faults;
    if (!a.faults.empty()) {
      auto started = GuardFaultProxy::start(a.faults, std::cerr);
      if (!started) {
        std::cerr << "faultctl guard: HTTP faults: " << started.error().describe() << "\n";
        return 1;
      }
      faults = std::move(*started);
      for (const auto& r : faults->redirects()) a.guard.redirects.push_back(r);
      if (auto t = compile_redirects(a.guard.redirects); !t) {
        std::cerr << "faultctl guard: --fault-host with --redirect: " << t.error().message << "\n";
        return int(kExitBadInput);
      }
      a.guard.env.insert(a.guard.env.end(), faults->env().begin(), faults->env().end());
    }
    Guard g(std::move(a.guard), std::cerr);
    const int code = g.run();
    if (faults) faults->print_summary(std::cerr);
    return code;
  });
}

}  // namespace faultline
