// faultctl guard ... -- CMD: run a command in a fresh cgroup under an egress policy.
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/guard_args.h"

namespace faultline {

int cmd_guard(const std::vector<std::string>& args) {
  constexpr RootNeed root{RootNeed::When::Always, "needs root (a cgroup and cgroup BPF programs)"};
  return run_command("faultctl guard", parse_guard_args(args), root, [](GuardOptions& o) {
    Guard g(std::move(o), std::cerr);
    return g.run();
  });
}

}  // namespace faultline
