// The checks of a TCP stream fault (`faultctl run tcp`) that need nothing from
// the running system: duration and drain caps, the toxics (their count and
// names), one scope. One place for the CLI, faultcp and faultd; errors name
// the flag.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/faults/stream/spec.h"

namespace faultline {

struct StreamCaps {
  static constexpr uint64_t kMaxDurationNs = 3600ULL * 1'000'000'000ULL;  // 1h
  static constexpr uint64_t kMinDurationNs = 100'000'000ULL;              // 100ms
  static constexpr uint64_t kMaxDrainNs = 600ULL * 1'000'000'000ULL;      // 10m
  static constexpr size_t kMaxToxics = 16;
  // An HTTP --delay: the packet latency cap (FaultCaps::kMaxDelayNs, which
  // faults/packet/ holds; ctl/http_args.cpp asserts they agree).
  static constexpr uint64_t kMaxHttpDelayNs = 60ULL * 1'000'000'000ULL;  // 60s
};

// Each --toxic text ("latency=200ms,jitter=20ms") parsed with the defaults of
// --direction and --toxicity; the second toxic of one type and stream is named
// "<type>_<stream>_2". At most StreamCaps::kMaxToxics.
[[nodiscard]] Result<std::vector<Toxic>> parse_toxics(const std::vector<std::string>& texts, Stream default_stream,
                                                      double default_toxicity);

[[nodiscard]] Status validate(const TcpFaultSpec& spec);

// The values of `faultctl run http`'s fault, match and TLS flags as written,
// by flag name without "--": a flag without a value (--reset, --tls,
// --terminate-tls) holds "", a repeatable one (--header-equals) one value per use.
struct HttpFlagValues {
  std::map<std::string, std::vector<std::string>> given;
  [[nodiscard]] bool has(const std::string& flag) const { return given.count(flag) != 0; }
  [[nodiscard]] const std::string& one(const std::string& flag) const { return given.at(flag).back(); }
};

// `faultctl run http`'s checks of those flags, for the CLI, faultcp and faultd:
// exactly one fault (--status, --delay, --reset, --truncate, --abort-stream,
// --llm) with the flags that apply to it, the match, --percent, --attempts,
// validate_http_fault(); --tls or --terminate-tls, --upstream-ca only with
// --terminate-tls (its file is not read here), and a fault that TLS without
// termination hides refused. Sets spec.terminate_tls and spec.upstream_ca and
// appends the fault to spec.http_faults (spec.target already read). Errors
// name the flag.
[[nodiscard]] Status http_fault_from_flags(const HttpFlagValues& v, TcpFaultSpec& spec);

// --upstream-ca without reading the file: only with --terminate-tls, a name.
[[nodiscard]] Status check_upstream_ca_flags(bool terminate, bool given, const std::string& file);

// Whether the connections to the target are TLS: declared (--tls), or the port is 443.
[[nodiscard]] bool target_is_tls(const TcpTarget& target, bool declared);

// A fault on TLS connections that are not terminated can only be a delay
// before the request or a reset, matched on the host (the SNI). Refused
// otherwise, naming the fault's flag and the way out:
// "--status on api.example.com:443: a status fault needs the request's content,
// which TLS hides without --terminate-tls (matched by SNI: delay and reset only)".
[[nodiscard]] Status check_fault_on_tls(const HttpFault& f, const std::string& fault_flag, const std::string& target);

}  // namespace faultline
