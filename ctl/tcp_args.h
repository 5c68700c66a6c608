// `faultctl run tcp` flags -> a TcpFaultSpec, with one-line errors naming the flag.
#pragma once

#include <cxxopts.hpp>
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

// What run tcp and run http share after the fault itself: --duration, --cgroup
// and --drain (add_stream_run_options, with every run's options), and their
// parse into a (the command scope already in a.spec.command).
void add_stream_run_options(cxxopts::Options& o);
[[nodiscard]] Status parse_stream_run_flags(const cxxopts::ParseResult& r, const std::vector<std::string>& args,
                                            TcpRunArgs& a);

}  // namespace faultline
