// faultctl features: the kernel probes, and the mechanism each fault uses.
#include "loader/features.h"

#include <unistd.h>

#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/faultd_route.h"
#include "userspace/ops/features_report.h"
#include "userspace/ops/verifier_costs.h"

namespace faultline {
namespace {

constexpr const char* kFeaturesUsage =
    "usage: faultctl features [--json] [--verifier-cost]\n"
    "  what this kernel supports, probed, and which mechanism each fault uses\n"
    "  --verifier-cost  load every BPF program (needs root) and print what the verifier\n"
    "                   spent on each: verified instructions, share of the 1M limit, time;\n"
    "                   exit 1 when one passes the budget (25%) or an object fails to load\n";

constexpr Example kFeaturesExamples[] = {
    {"each fault's mechanism and why, then every kernel probe", "faultctl features"},
    {"the same as one JSON document", "faultctl features --json"},
    {"each BPF program's verifier cost on this kernel", "sudo faultctl features --verifier-cost"},
};

}  // namespace

int cmd_features(const std::vector<std::string>& args) {
  return run_command(
      "faultctl features",
      parse_switches(args, {"--json", "--verifier-cost"}, with_examples(kFeaturesUsage, kFeaturesExamples)), kRootNever,
      [](const Switches& s) {
        const bool json = s.has("--json");
        if (s.has("--verifier-cost")) {
          if (::geteuid() != 0) {
            std::cerr << "faultctl features --verifier-cost: needs root (it loads every BPF program)\n";
            return 1;
          }
          return write_verifier_costs(json, std::cout);
        }
        if (auto code = report_via_faultd(json ? "/v1/features" : "/v1/features?format=text")) return *code;
        probe_features_afresh();  // what the kernel says now; the cache is rewritten with it
        return write_features(json, std::cout);
      });
}

}  // namespace faultline
