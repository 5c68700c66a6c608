// `faultctl run tcp` flags -> a TcpFaultSpec, with one-line errors naming the flag.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/help.h"
#include "ctl/run_flags.h"
#include "userspace/faults/stream/spec.h"

namespace faultline {

struct TcpRunArgs {
  TcpFaultSpec spec;
  RunFlags flags;
};

// args are what follows "run tcp": flags, and for the command scope "--" and the command.
[[nodiscard]] Result<Parsed<TcpRunArgs>> parse_tcp_args(const std::vector<std::string>& args);

}  // namespace faultline
