// The packet fault -> stream fault translation of --via proxy.
#include "ctl/packet_via_proxy.h"

#include <netinet/in.h>

#include <algorithm>

#include "base/units.h"

namespace faultline {
namespace {

bool has(const std::vector<std::string>& given, const std::string& flag) {
  return std::find(given.begin(), given.end(), flag) != given.end();
}

}  // namespace

Result<TcpFaultSpec> stream_fault_for(const FaultSpec& spec, const std::vector<std::string>& given) {
  const std::string why = " (the proxy intercepts TCP connects by destination)";
  for (const char* flag : {"dev", "netns", "source", "max-injections", "start-after", "seed", "force"}) {
    if (has(given, flag))
      return input_error(EINVAL, std::string("--") + flag + " has no meaning with --via proxy" + why +
                                     "; drop it, or use --via edt where the kernel has sch_fq");
  }
  if (spec.dir_mask != FL_DIR_EGRESS)
    return input_error(EINVAL, "--direction: --via proxy delays what this host sends (egress) only" + why);
  if (spec.proto != 0 && spec.proto != IPPROTO_TCP)
    return input_error(EINVAL, "--proto: --via proxy works on TCP only" + why);
  if (spec.targets.empty())
    return input_error(EINVAL, "--target is required with --via proxy: the proxy intercepts chosen destinations");
  TcpFaultSpec t;
  t.duration_ns = spec.duration_ns;
  t.cgroup = spec.cgroup;
  std::string text;
  for (const auto& p : spec.targets) {
    EgressRule r;
    r.verdict = Verdict::Deny;
    r.prefix = p;
    r.ports = spec.ports;
    r.proto = IPPROTO_TCP;
    r.text = p.v4 ? p.str() : "[" + p.str() + "]";
    if (spec.ports.lo != 0)
      r.text += ":" + std::to_string(spec.ports.lo) +
                (spec.ports.hi != spec.ports.lo ? "-" + std::to_string(spec.ports.hi) : "");
    text += (text.empty() ? "" : ",") + r.text;
    t.target.dests.push_back(r);
  }
  t.target.text = text;
  Toxic x;
  x.stream = Stream::upstream;
  x.toxicity = spec.percent / 100.0;
  if (spec.kind == FaultKind::Latency) {
    if (spec.delay_ns % 1'000'000 != 0 || spec.jitter_ns % 1'000'000 != 0)
      return input_error(EINVAL, "--delay and --jitter: --via proxy works in whole milliseconds");
    x.attributes = LatencyToxic{int64_t(spec.delay_ns / 1'000'000), int64_t(spec.jitter_ns / 1'000'000)};
  } else if (spec.kind == FaultKind::Bandwidth) {
    // bits/s -> Toxiproxy's KB/s (1000 bytes), at least 1.
    x.attributes = BandwidthToxic{std::max<int64_t>(1, int64_t(spec.rate_bps / 8 / 1000))};
  } else {
    return input_error(EINVAL, "--via proxy: only latency and bandwidth faults run through the proxy");
  }
  x.name = std::string(x.type()) + "_upstream";
  if (auto s = validate_toxic_strict(x); !s) return input_error(EINVAL, "--via proxy: " + s.error().message);
  t.toxics.push_back(x);
  return t;
}

std::string stream_fault_notice(const FaultSpec& spec, bool chosen_automatically) {
  std::string out = chosen_automatically ? "notice: this kernel has no sch_fq (EDT pacing), so this " +
                                               std::string(spec.kind == FaultKind::Latency ? "latency" : "bandwidth") +
                                               " fault runs through the proxy (--via proxy) instead: "
                                         : "notice: --via proxy: ";
  out += "TCP connections this host opens to the target";
  out += spec.cgroup.empty() ? "" : " from cgroup " + spec.cgroup;
  out += spec.kind == FaultKind::Latency ? " have what they send delayed" : " have what they send paced";
  out += " per stream, not per packet; UDP and ICMP are not touched";
  if (spec.percent < 100) out += "; --percent picks connections, not packets";
  if (spec.kind == FaultKind::Latency && spec.jitter_ns != 0) out += "; the jitter is uniform";
  return out;
}

}  // namespace faultline
