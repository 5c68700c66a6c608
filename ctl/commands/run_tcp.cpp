// faultctl run tcp and run http: toxics on the TCP connections to a target, or
// HTTP faults on its requests, through a proxy the kernel redirects them to,
// run guarded.
#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/http_args.h"
#include "ctl/tcp_args.h"
#include "userspace/faults/stream/run.h"

namespace faultline {
namespace {

int run_stream(std::string_view who, Result<Parsed<TcpRunArgs>> parsed) {
  constexpr RootNeed root{RootNeed::When::UnlessDryRun, "needs root"};
  return run_command(who, std::move(parsed), root, [&](TcpRunArgs& a) {
    TcpRun fault(a.spec, std::cerr);
    int code = run_fault(fault, a.flags, std::string(who));
    // The record is written; the connections released at the end may finish.
    if (size_t left = fault.drain(); left != 0 && !a.flags.json)
      std::cerr << who << ": " << left << " released connection" << (left == 1 ? " was" : "s were")
                << " still open after --drain; closed\n";
    return code;
  });
}

}  // namespace

int cmd_run_tcp(const std::vector<std::string>& args) { return run_stream("faultctl run tcp", parse_tcp_args(args)); }

int cmd_run_http(const std::vector<std::string>& args) {
  return run_stream("faultctl run http", parse_http_args(args));
}

}  // namespace faultline
