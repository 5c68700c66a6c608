// faultctl top: flags, then the live view.
#include <unistd.h>

#include <iostream>

#include "ctl/commands.h"
#include "base/exit_code.h"
#include "base/units.h"
#include "userspace/enforce/flow_top.h"

namespace faultline {

int cmd_top(const std::vector<std::string>& args) {
  FlowTopOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> const std::string* {
      if (i + 1 >= args.size()) {
        std::cerr << "faultctl top: " << flag << " needs a value\n";
        return nullptr;
      }
      return &args[++i];
    };
    if (a == "--once") {
      o.once = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--cgroup") {
      const std::string* v = value("--cgroup");
      if (v == nullptr) return kExitBadInput;
      if (v->empty()) {
        std::cerr << "faultctl top: --cgroup: empty path\n";
        return kExitBadInput;
      }
      o.cgroup = *v;
    } else if (a == "--interval") {
      const std::string* v = value("--interval");
      if (v == nullptr) return kExitBadInput;
      auto d = parse_duration_ns(*v);
      if (!d || *d < 100'000'000ULL || *d > 3'600'000'000'000ULL) {
        std::cerr << "faultctl top: --interval " << *v << ": a duration from 100ms to 1h\n";
        return kExitBadInput;
      }
      o.interval_ns = *d;
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: faultctl top [--cgroup PATH] [--interval 2s] [--once] [--json]\n"
                   "  destinations (host:port) with connects and bytes each way, busiest first,\n"
                   "  for one cgroup v2 or the whole host, counted from the moment top starts\n";
      return kExitCompleted;
    } else {
      std::cerr << "faultctl top: unknown argument '" << a << "'\n";
      return kExitBadInput;
    }
  }
  if (::geteuid() != 0) {
    std::cerr << "faultctl top: needs root (cgroup BPF programs)\n";
    return kExitFailure;
  }
  return run_flow_top(o, std::cout, std::cerr);
}

}  // namespace faultline
