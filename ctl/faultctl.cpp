// faultctl: the operator's command line. Thin: every command is library code.
#include <iostream>
#include <string>
#include <vector>

#include "ctl/commands.h"
#include "ctl/resource_state.h"
#include "loader/libbpf_log.h"
#include "base/exit_code.h"

namespace {

constexpr const char* kUsage = R"(usage: faultctl <command> [flags]

commands:
  run KIND ...     apply a packet fault for a fixed duration (faultctl run --help)
  run syscall ...  make syscalls fail with an errno (faultctl run syscall --help)
  run process|cpu|memory|disk ...
                   apply a host resource fault, ended by a detached reaper even if
                   faultctl dies (faultctl run cpu --help)
  guard ... -- CMD run a command in a fresh cgroup under an egress policy
  top              destinations and traffic of a cgroup or the whole host, live
  status           list active faults (packet, resource, syscall) and guards
  abort ID|--all   end one fault (N, rN, sN) or release a guard (gN); --all: every fault
  report DIR       print an experiment record (--record DIR); --verify checks it
  features         what this kernel supports and which mechanism each fault uses
  uninstall        remove every program, link, filter, qdisc and pin of Faultline,
                   and revert every resource fault

experiments: --hypothesis TEXT --record DIR [--steady-state 30s] [--slo p99<300ms]

exit codes: 0 done (hypothesis held), 1 failure, 2 bad input, 7 aborted by the
guardrail (or refused: steady state outside it), 8 hypothesis refuted
)";

}  // namespace

int main(int argc, char** argv) {
  faultline::configure_libbpf_log();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? faultline::kExitBadInput : faultline::kExitCompleted;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  // Resource faults cannot expire in the kernel: every invocation reverts the
  // overdue ones whose reaper died, and re-arms faults that lost their reaper.
  faultline::sweep_resource_state(std::cerr);
  if (cmd == "run") return faultline::cmd_run(args);
  if (cmd == "status") return faultline::cmd_status(args);
  if (cmd == "abort") return faultline::cmd_abort(args);
  if (cmd == "features") return faultline::cmd_features(args);
  if (cmd == "uninstall") return faultline::cmd_uninstall(args);
  if (cmd == "guard") return faultline::cmd_guard(args);
  if (cmd == "top") return faultline::cmd_top(args);
  if (cmd == "report") return faultline::cmd_report(args);
  std::cerr << "faultctl: unknown command '" << cmd << "' (run, status, abort, report, features, uninstall)\n";
  return faultline::kExitBadInput;
}
