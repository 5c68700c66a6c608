// faultctl run syscall: make syscalls fail with an errno, by the best mechanism
// the kernel has, run guarded.
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/syscall_args.h"
#include "userspace/faults/syscall/run.h"

namespace faultline {

int cmd_run_syscall(const std::vector<std::string>& args) {
  constexpr std::string_view who = "faultctl run syscall";
  constexpr RootNeed root{RootNeed::When::UnlessDryRun, "needs root"};
  return run_command(who, parse_syscall_args(args), root, [&](SyscallRunArgs& a) {
    auto fault = SyscallRun::plan(a.spec, std::cerr);
    if (!fault) return report_error(who, fault.error());
    return run_fault(**fault, a.flags, std::string(who));
  });
}

}  // namespace faultline
