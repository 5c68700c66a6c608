// faultctl run syscall and faultctl guard: parse, check root, run.
#include <unistd.h>

#include <iostream>

#include "ctl/commands.h"
#include "ctl/syscall_args.h"
#include "base/exit_code.h"
#include "userspace/faults/syscall/run.h"

namespace faultline {

int cmd_run_syscall(const std::vector<std::string>& args) {
  auto spec = parse_syscall_args(args);
  if (!spec) {
    if (spec.error().err == 0) {
      std::cout << spec.error().message;
      return kExitCompleted;
    }
    std::cerr << "faultctl run syscall: " << spec.error().message << "\n";
    return kExitBadInput;
  }
  if (!spec->flags.dry_run && ::geteuid() != 0) {
    std::cerr << "faultctl run syscall: needs root\n";
    return kExitFailure;
  }
  auto fault = SyscallRun::plan(spec->spec, std::cerr);
  if (!fault) {
    std::cerr << "faultctl run syscall: " << fault.error().describe() << "\n";
    return fault.error().bad_input ? kExitBadInput : kExitFailure;
  }
  return run_fault(**fault, spec->flags, "faultctl run syscall");
}

int cmd_guard(const std::vector<std::string>& args) {
  auto opts = parse_guard_args(args);
  if (!opts) {
    if (opts.error().err == 0) {
      std::cout << opts.error().message;
      return kExitCompleted;
    }
    std::cerr << "faultctl guard: " << opts.error().message << "\n";
    return kExitBadInput;
  }
  if (::geteuid() != 0) {
    std::cerr << "faultctl guard: needs root (a cgroup and cgroup BPF programs)\n";
    return kExitFailure;
  }
  Guard g(std::move(*opts), std::cerr);
  return g.run();
}

}  // namespace faultline
