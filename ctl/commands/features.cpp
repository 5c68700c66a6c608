// faultctl features: the kernel probes, and the mechanism each fault uses.
#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/faultd_route.h"
#include "userspace/ops/features_report.h"

namespace faultline {
namespace {

constexpr const char* kFeaturesUsage =
    "usage: faultctl features [--json]\n"
    "  what this kernel supports, probed, and which mechanism each fault uses\n";

constexpr Example kFeaturesExamples[] = {
    {"each fault's mechanism and why, then every kernel probe", "faultctl features"},
    {"the same as one JSON document", "faultctl features --json"},
};

}  // namespace

int cmd_features(const std::vector<std::string>& args) {
  return run_command("faultctl features",
                     parse_switches(args, {"--json"}, with_examples(kFeaturesUsage, kFeaturesExamples)), kRootNever,
                     [](const Switches& s) {
                       const bool json = s.has("--json");
                       if (auto code = report_via_faultd(json ? "/v1/features" : "/v1/features?format=text"))
                         return *code;
                       return write_features(json, std::cout);
                     });
}

}  // namespace faultline
