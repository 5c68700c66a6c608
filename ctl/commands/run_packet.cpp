// faultctl run KIND: a packet fault, planned by the netfault engine and run guarded.
#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/packet_args.h"
#include "ctl/packet_via_proxy.h"
#include "loader/features.h"
#include "userspace/faults/packet/run.h"
#include "userspace/faults/stream/run.h"

namespace faultline {

int cmd_run_packet(const std::vector<std::string>& args) {
  constexpr std::string_view who = "faultctl run";
  constexpr RootNeed root{RootNeed::When::UnlessDryRun,
                          "needs root (CAP_BPF and CAP_NET_ADMIN) to load and attach programs"};
  return run_command(who, parse_packet_args(args), root, [&](PacketRunArgs& a) {
    const bool paced = a.spec.kind == FaultKind::Latency || a.spec.kind == FaultKind::Bandwidth;
    const bool automatic = paced && a.via == PacketVia::Auto && !packet_features().sch_fq.available;
    if (a.via == PacketVia::Proxy || automatic) {
      auto stream = stream_fault_for(a.spec, a.given);
      if (!stream) return report_error(who, stream.error());
      std::cerr << stream_fault_notice(a.spec, automatic) << "\n";
      TcpRun fault(*stream, std::cerr);
      int code = run_fault(fault, a.flags, std::string(who));
      (void)fault.drain();
      return code;
    }
    auto fault = PacketRun::plan(a.spec, a.attach);
    if (!fault) return report_error(who, fault.error());
    return run_fault(**fault, a.flags, std::string(who));
  });
}

}  // namespace faultline
