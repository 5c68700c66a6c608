// faultctl run KIND: a packet fault, planned by the netfault engine and run
// guarded, here or (when faultd runs) in faultd with its resident state.
#include <unistd.h>

#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/faultd_route.h"
#include "ctl/packet_args.h"
#include "ctl/packet_via_proxy.h"
#include "loader/features.h"
#include "userspace/daemon/served_run.h"
#include "userspace/faults/packet/experiment.h"
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

// What faultd serves: a packet fault in the kernel, applied, sent as the
// typed experiment (its to_json()). A dry run touches nothing; the proxy
// lives in this process; a record's files belong to this process's view of
// the file system; what the experiment's fields cannot hold (a duration in
// fractions of a second, --slo-burn-rate, --slo-watchdog, --signal-window,
// a relative CA path, ...) runs here. None: run standalone.
std::optional<nlohmann::json> served_request(const PacketRunArgs& a) {
  if (a.flags.dry_run || a.flags.record || a.flags.slo_watchdog || through_proxy(a)) return std::nullopt;
  auto spec = packet_spec_to_json(a.spec);
  if (!spec || !add_experiment_guardrails(a.flags.guardrails, a.flags.record, *spec)) return std::nullopt;
  return served_run_request(std::move(*spec), a.attach, a.flags.json, a.flags.redactor, ::isatty(STDERR_FILENO) != 0);
}

int run_planned(PacketRunArgs& a) {
  auto fault = PacketRun::plan(a.spec, a.attach);
  if (!fault) {
    std::cerr << kWho << ": " << fault.error().describe() << "\n";
    return fault.error().bad_input ? kExitBadInput : kExitFailure;
  }
  return run_fault(**fault, a.flags, std::string(kWho));
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
    if (auto request = served_request(a); request && !fault_start_refused()) {
      if (auto code = run_via_faultd(*request)) return *code;
    }
    return run_planned(a);
  });
}

}  // namespace faultline
