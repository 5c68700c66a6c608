// faultctl run: parse, then hand the fault to the guarded run.
#include <unistd.h>

#include <iostream>

#include "ctl/commands.h"
#include "ctl/resource_command.h"
#include "ctl/run_args.h"
#include "userspace/faults/packet/run.h"
#include "userspace/faults/resource/spec.h"

namespace faultline {

int cmd_run(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "syscall") return cmd_run_syscall({args.begin() + 1, args.end()});
  if (!args.empty() && is_resource_kind(args[0])) return cmd_run_resource(args);
  auto opts = parse_run_args(args);
  if (!opts) {
    if (opts.error().err == 0) {  // --help
      std::cout << opts.error().message;
      return kExitCompleted;
    }
    std::cerr << "faultctl run: " << opts.error().message << "\n";
    return kExitBadInput;
  }
  if (!opts->flags.dry_run && ::geteuid() != 0) {
    std::cerr << "faultctl run: needs root (CAP_BPF and CAP_NET_ADMIN) to load and attach programs\n";
    return kExitFailure;
  }
  auto fault = PacketRun::plan(opts->spec, opts->attach);
  if (!fault) {
    std::cerr << "faultctl run: " << fault.error().describe() << "\n";
    return fault.error().bad_input ? kExitBadInput : kExitFailure;
  }
  return run_fault(**fault, opts->flags, "faultctl run");
}

}  // namespace faultline
