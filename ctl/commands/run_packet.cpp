// faultctl run KIND: a packet fault, planned by the netfault engine and run
// guarded, here or (when faultd runs) in faultd with its resident state.
#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/faultd_route.h"
#include "ctl/packet_args.h"
#include "ctl/packet_via_proxy.h"
#include "ctl/served_run.h"
#include "loader/features.h"
#include "userspace/faults/packet/run.h"
#include "userspace/faults/stream/run.h"
#include "userspace/state/kill_switch.h"

namespace faultline {
namespace {

constexpr std::string_view kWho = "faultctl run";

// latency and bandwidth go through the proxy when asked, or on their own
// where the kernel has no fq to pace packets.
bool through_proxy(const PacketRunArgs& a) {
  const bool paced = a.spec.kind == FaultKind::Latency || a.spec.kind == FaultKind::Bandwidth;
  return a.via == PacketVia::Proxy || (paced && a.via == PacketVia::Auto && !packet_features().sch_fq.available);
}

// What faultd serves: a packet fault in the kernel, applied. A dry run touches
// nothing; the proxy lives in this process; a record's files and a relative
// CA path belong to this process's view of the file system.
bool faultd_serves(const PacketRunArgs& a) {
  if (a.flags.dry_run || a.flags.record || through_proxy(a)) return false;
  return !(a.flags.guardrails.health && !a.flags.guardrails.health->ca_file.empty() &&
           a.flags.guardrails.health->ca_file.front() != '/');
}

// Plans the fault and runs it guarded: the part faultctl and faultd share.
int run_planned(PacketRunArgs& a, const RunIo& io, RunStreams* served) {
  auto fault = PacketRun::plan(a.spec, a.attach);
  if (!fault) {
    io.err << kWho << ": " << fault.error().describe() << "\n";
    return fault.error().bad_input ? kExitBadInput : kExitFailure;
  }
  RunnableFault& watched = served != nullptr ? served->hold(**fault) : **fault;
  return run_fault(watched, a.flags, std::string(kWho), io);
}

}  // namespace

int cmd_run_packet(const std::vector<std::string>& args) {
  constexpr RootNeed root{RootNeed::When::UnlessDryRun,
                          "needs root (CAP_BPF and CAP_NET_ADMIN) to load and attach programs"};
  return run_command(kWho, parse_packet_args(args), root, [&](PacketRunArgs& a) {
    if (through_proxy(a)) {
      const bool automatic = a.via == PacketVia::Auto;
      auto stream = stream_fault_for(a.spec, a.given);
      if (!stream) return report_error(kWho, stream.error());
      std::cerr << stream_fault_notice(a.spec, automatic) << "\n";
      TcpRun fault(*stream, std::cerr);
      int code = run_fault(fault, a.flags, std::string(kWho));
      (void)fault.drain();
      return code;
    }
    // A start the kill switch or this process's FAULTLINE_DISABLED refuses is
    // refused here, as it always was.
    if (faultd_serves(a) && !fault_start_refused()) {
      if (auto code = run_via_faultd(args)) return *code;
    }
    return run_planned(a, RunIo{std::cout, std::cerr}, nullptr);
  });
}

int serve_faultd_run(const nlohmann::json& request, RunStreams& streams) {
  const RunIo& io = streams.io();
  std::vector<std::string> args;
  for (const auto& w : request.at("args")) args.push_back(w.get<std::string>());
  auto parsed = parse_packet_args(args);
  if (!parsed) {
    io.err << kWho << ": " << parsed.error().message << "\n";
    return kExitBadInput;
  }
  if (const auto* help = std::get_if<HelpText>(&*parsed)) {
    io.out << help->text << std::flush;
    return kExitCompleted;
  }
  PacketRunArgs& a = std::get<PacketRunArgs>(*parsed);
  if (!faultd_serves(a)) {
    io.err << kWho << ": faultd serves packet faults applied in the kernel; run this one with faultctl alone\n";
    return kExitBadInput;
  }
  return run_planned(a, io, &streams);
}

}  // namespace faultline
