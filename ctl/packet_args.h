// `faultctl run KIND` flags for packet faults -> a FaultSpec, with one-line
// errors naming the flag.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/flag_words.h"
#include "ctl/help.h"
#include "ctl/run_flags.h"
#include "loader/netfault_attachments.h"
#include "userspace/faults/packet/spec.h"

namespace faultline {

// latency and bandwidth: packets paced by EDT on fq, or TCP streams through
// the proxy (`--via proxy`; chosen automatically on a kernel without sch_fq).
enum class PacketVia { Auto, Edt, Proxy };

struct PacketRunArgs {
  FaultSpec spec;
  AttachMode attach = AttachMode::Auto;
  PacketVia via = PacketVia::Auto;
  std::vector<std::string> given;  // every flag given, without "--", for the proxy's checks
  RunFlags flags;
};

// args are what follows "run" on the command line.
[[nodiscard]] Result<Parsed<PacketRunArgs>> parse_packet_args(const std::vector<std::string>& args);

[[nodiscard]] std::string packet_run_usage();

// Its flags, and whether each takes a value.
[[nodiscard]] FlagTable packet_run_flags();

}  // namespace faultline
