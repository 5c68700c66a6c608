// faultctl abort ID|--all: end one fault or release one guard; --all is the kill switch.
#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/faultd_route.h"
#include "ctl/flag_error.h"
#include "userspace/ops/abort_faults.h"

namespace faultline {
namespace {

constexpr const char* kAbortUsage =
    "usage: faultctl abort ID | --all\n"
    "  ID: end one fault (N, rN or sN, see faultctl status) or release a guard (gN)\n"
    "  --all: the kill switch: end every packet and syscall fault, revert every\n"
    "  resource fault and remove Faultline from every device; guards stay\n";

constexpr Example kAbortExamples[] = {
    {"end packet fault 3 (IDs from faultctl status)", "faultctl abort 3"},
    {"end resource fault r2: its changes are reverted", "faultctl abort r2"},
    {"release guard g1: its command runs on, unguarded", "faultctl abort g1"},
    {"the kill switch", "faultctl abort --all"},
};

// What abort ends: every fault (--all), or the fault or guard with this ID.
struct AbortArgs {
  bool all = false;
  std::string id;  // N (packet), rN (resource), sN (syscall) or gN (guard)
};

Result<Parsed<AbortArgs>> parse_abort_args(const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "-h" || args[0] == "--help"))
    return Parsed<AbortArgs>(HelpText{with_examples(kAbortUsage, kAbortExamples)});
  if (args.size() != 1) return bad("give one fault ID (see faultctl status) or --all");
  const std::string& id = args[0];
  if (id == "--all") return Parsed<AbortArgs>(AbortArgs{true, ""});
  if (!is_fault_id(id))
    return bad("'" + id + "' is not a fault ID (a number, rN, sN or gN from faultctl status) or --all");
  return Parsed<AbortArgs>(AbortArgs{false, id});
}

}  // namespace

int cmd_abort(const std::vector<std::string>& args) {
  return run_command("faultctl abort", parse_abort_args(args), kRootNever, [](const AbortArgs& a) {
    if (auto code = command_via_faultd(a.all ? "/v1/abort-all" : "/v1/faults/" + a.id + "/abort")) return *code;
    return a.all ? abort_all_faults(std::cout, std::cerr) : abort_fault(a.id, std::cout, std::cerr);
  });
}

}  // namespace faultline
