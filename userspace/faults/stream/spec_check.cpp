// TCP stream fault checks shared by faultctl, faultcp and faultd (moved here
// from ctl/tcp_args.cpp, whose flag parser now calls them).
#include "userspace/faults/stream/spec_check.h"

#include <cerrno>
#include <map>

namespace faultline {

Result<std::vector<Toxic>> parse_toxics(const std::vector<std::string>& texts, Stream default_stream,
                                        double default_toxicity) {
  std::vector<Toxic> out;
  std::map<std::string, int> taken;
  for (const auto& w : texts) {
    auto x = parse_toxic_words(w, default_stream, default_toxicity);
    if (!x) return x.error();
    // Two toxics of one type and stream: the second is "<type>_<stream>_2".
    if (int n = ++taken[x->name]; n > 1) x->name += "_" + std::to_string(n);
    out.push_back(std::move(*x));
  }
  if (out.size() > StreamCaps::kMaxToxics)
    return input_error(EINVAL, "--toxic: at most " + std::to_string(StreamCaps::kMaxToxics) + " toxics");
  return out;
}

Status validate(const TcpFaultSpec& s) {
  if (s.duration_ns == 0) return input_error(EINVAL, "--duration is required (at most 1h), e.g. --duration 1m");
  if (s.duration_ns > StreamCaps::kMaxDurationNs) return input_error(EINVAL, "--duration is over the cap of 1h");
  if (s.duration_ns < StreamCaps::kMinDurationNs) return input_error(EINVAL, "--duration must be at least 100ms");
  if (!s.cgroup.empty() && !s.command.empty())
    return input_error(EINVAL, "give one scope: --cgroup PATH or -- COMMAND ARGS (neither: host-wide)");
  if (s.drain_ns > StreamCaps::kMaxDrainNs) return input_error(EINVAL, "--drain is over the cap of 10m");
  if (s.toxics.size() > StreamCaps::kMaxToxics)
    return input_error(EINVAL, "--toxic: at most " + std::to_string(StreamCaps::kMaxToxics) + " toxics");
  return {};
}

}  // namespace faultline
