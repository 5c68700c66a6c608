// faultctl run: parse, then hand the experiment to the library.
#include <unistd.h>

#include <iostream>

#include "ctl/commands.h"
#include "ctl/resource_command.h"
#include "ctl/run_args.h"
#include "userspace/faults/resource_spec.h"

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
  if (!opts->dry_run && ::geteuid() != 0) {
    std::cerr << "faultctl run: needs root (CAP_BPF and CAP_NET_ADMIN) to load and attach programs\n";
    return kExitFailure;
  }
  Experiment e(std::move(*opts), std::cout, std::cerr);
  return e.run();
}

}  // namespace faultline
