// faultctl run: the first word picks the fault family.
#include "ctl/commands/commands.h"
#include "userspace/faults/resource/spec.h"

namespace faultline {

int cmd_run(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "syscall") return cmd_run_syscall({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "tcp") return cmd_run_tcp({args.begin() + 1, args.end()});
  if (!args.empty() && is_resource_kind(args[0])) return cmd_run_resource(args);
  return cmd_run_packet(args);  // a packet KIND, or nothing (the packet help and errors say what fits)
}

}  // namespace faultline
