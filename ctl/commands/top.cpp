// faultctl top: flags, then the live view.
#include <iostream>

#include "base/units.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "userspace/enforce/flow_top.h"

namespace faultline {
namespace {

constexpr const char* kTopUsage =
    "usage: faultctl top [--cgroup PATH] [--interval 2s] [--once] [--json]\n"
    "  destinations (host:port) with connects and bytes each way, busiest first,\n"
    "  for one cgroup v2 or the whole host, counted from the moment top starts\n";

constexpr Example kTopExamples[] = {
    {"the whole host, refreshed every 2 s", "faultctl top"},
    {"one service's cgroup (a path under the cgroup v2 mount), every 5 s",
     "faultctl top --cgroup system.slice/nginx.service --interval 5s"},
    {"one reading after 2 s, as JSON, for a script", "faultctl top --once --json"},
};

Result<Parsed<FlowTopOptions>> parse_top_args(const std::vector<std::string>& args) {
  FlowTopOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> Result<std::string> {
      if (i + 1 >= args.size()) return bad(std::string(flag) + " needs a value");
      return args[++i];
    };
    if (a == "--once") {
      o.once = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--cgroup") {
      auto v = value("--cgroup");
      if (!v) return v.error();
      if (v->empty()) return bad("--cgroup: empty path");
      o.cgroup = *v;
    } else if (a == "--interval") {
      auto v = value("--interval");
      if (!v) return v.error();
      auto d = parse_duration_ns(*v);
      if (!d || *d < 100'000'000ULL || *d > 3'600'000'000'000ULL)
        return bad("--interval " + *v + ": a duration from 100ms to 1h");
      o.interval_ns = *d;
    } else if (a == "-h" || a == "--help") {
      return Parsed<FlowTopOptions>(HelpText{with_examples(kTopUsage, kTopExamples)});
    } else {
      return bad("unknown argument '" + a + "'");
    }
  }
  return Parsed<FlowTopOptions>(std::move(o));
}

}  // namespace

int cmd_top(const std::vector<std::string>& args) {
  constexpr RootNeed root{RootNeed::When::Always, "needs root (cgroup BPF programs)"};
  return run_command("faultctl top", parse_top_args(args), root,
                     [](const FlowTopOptions& o) { return run_flow_top(o, std::cout, std::cerr); });
}

}  // namespace faultline
