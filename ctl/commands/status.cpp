// faultctl status: the active faults of every family, and the guards.
#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/faultd_route.h"
#include "userspace/ops/status_report.h"

namespace faultline {
namespace {

constexpr const char* kStatusUsage =
    "usage: faultctl status [--json]\n"
    "  the active faults (packet, resource, syscall) and guards: what each does,\n"
    "  its counters and the time it has left; --json: one JSON object\n";

constexpr Example kStatusExamples[] = {
    {"what runs now, with its counters", "faultctl status"},
    {"the same as one JSON object, for a script", "faultctl status --json"},
};

}  // namespace

int cmd_status(const std::vector<std::string>& args) {
  return run_command("faultctl status", parse_switches(args, {"--json"}, with_examples(kStatusUsage, kStatusExamples)),
                     kRootNever, [](const Switches& s) {
                       const bool json = s.has("--json");
                       if (auto code = report_via_faultd(json ? "/v1/status" : "/v1/status?format=text")) return *code;
                       return write_status(json, std::cout);
                     });
}

}  // namespace faultline
