// faultctl run KIND: a packet fault, planned by the netfault engine and run guarded.
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/packet_args.h"
#include "userspace/faults/packet/run.h"

namespace faultline {

int cmd_run_packet(const std::vector<std::string>& args) {
  constexpr std::string_view who = "faultctl run";
  constexpr RootNeed root{RootNeed::When::UnlessDryRun,
                          "needs root (CAP_BPF and CAP_NET_ADMIN) to load and attach programs"};
  return run_command(who, parse_packet_args(args), root, [&](PacketRunArgs& a) {
    auto fault = PacketRun::plan(a.spec, a.attach);
    if (!fault) return report_error(who, fault.error());
    return run_fault(**fault, a.flags, std::string(who));
  });
}

}  // namespace faultline
