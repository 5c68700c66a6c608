// faultctl run tcp: toxics on the TCP connections to a target, through a proxy
// the kernel redirects them to, run guarded.
#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/tcp_args.h"
#include "userspace/faults/stream/run.h"

namespace faultline {

int cmd_run_tcp(const std::vector<std::string>& args) {
  constexpr std::string_view who = "faultctl run tcp";
  constexpr RootNeed root{RootNeed::When::UnlessDryRun, "needs root"};
  return run_command(who, parse_tcp_args(args), root, [&](TcpRunArgs& a) {
    TcpRun fault(a.spec, std::cerr);
    int code = run_fault(fault, a.flags, std::string(who));
    // The record is written; the connections released at the end may finish.
    if (size_t left = fault.drain(); left != 0 && !a.flags.json)
      std::cerr << who << ": " << left << " released connection" << (left == 1 ? " was" : "s were")
                << " still open after --drain; closed\n";
    return code;
  });
}

}  // namespace faultline
