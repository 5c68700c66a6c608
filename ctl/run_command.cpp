// faultctl run: parse, then hand the fault to the guarded run.
#include "ctl/command.h"
#include "ctl/commands.h"
#include "ctl/resource_command.h"
#include "ctl/run_args.h"
#include "userspace/faults/packet/run.h"
#include "userspace/faults/resource/spec.h"

namespace faultline {

int cmd_run(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "syscall") return cmd_run_syscall({args.begin() + 1, args.end()});
  if (!args.empty() && is_resource_kind(args[0])) return cmd_run_resource(args);
  constexpr std::string_view who = "faultctl run";
  constexpr RootNeed root{RootNeed::When::UnlessDryRun,
                          "needs root (CAP_BPF and CAP_NET_ADMIN) to load and attach programs"};
  return run_command(who, parse_run_args(args), root, [&](PacketRunArgs& a) {
    auto fault = PacketRun::plan(a.spec, a.attach);
    if (!fault) return report_error(who, fault.error());
    return run_fault(**fault, a.flags, std::string(who));
  });
}

}  // namespace faultline
