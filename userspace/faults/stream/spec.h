// A TCP stream fault: toxics (userspace/proxy/toxic.h) on the TCP connections a
// scope opens to a target, which the kernel redirects to an in-process proxy.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/net/egress_rules.h"
#include "userspace/proxy/http_fault.h"
#include "userspace/proxy/toxic.h"

namespace faultline {

// "--target HOST:PORT": the destinations whose TCP connects are intercepted. HOST
// is an address, a CIDR, or a name (every address it resolves to, at parse time);
// PORT one port or a range A-B. IPv6 in brackets: "[::1]:443".
struct TcpTarget {
  std::string text;               // as written
  std::vector<EgressRule> dests;  // one per address or prefix, proto TCP
};

[[nodiscard]] Result<TcpTarget> parse_tcp_target(const std::string& text);

// "--toxic TYPE=VALUE[,KEY=VALUE...]" in Toxiproxy's types and units, with
// operator-friendly values:
//   latency=200ms[,jitter=20ms]       bandwidth=100KB/s (KB = 1000 bytes)
//   slow_close=500ms                   timeout=2s (0 = hold the data until the end)
//   reset_peer=100ms (0 = at once)     slicer=64B[,variation=16B][,delay=100us]
//   limit_data=1MB                     noop
// plus, for any type, direction=upstream|downstream and toxicity=0..1 (else the
// defaults given, from --direction and --toxicity). The name is "<type>_<stream>",
// or "<type>_<stream>_N" for the Nth toxic of the same type and stream.
[[nodiscard]] Result<Toxic> parse_toxic_words(const std::string& text, Stream default_stream, double default_toxicity);

// Whether a word ("latency=200ms", "noop") starts a toxic: its key is a type.
// (A command line split at commas is regrouped with it: the words up to the
// next type are that toxic's.)
[[nodiscard]] bool starts_toxic(const std::string& word);

// Whether name is one of Toxiproxy's toxic types ("latency", ..., "noop").
[[nodiscard]] bool is_toxic_type(std::string_view name);

// A stream fault: toxics on the TCP connections to the target (faultctl run
// tcp), or HTTP faults on the requests they carry (faultctl run http: the proxy
// then speaks HTTP/1.1 on them, docs/l7.md).
struct TcpFaultSpec {
  TcpTarget target;
  std::vector<Toxic> toxics;  // in the order given
  std::vector<HttpFault> http_faults;
  // TLS on the HTTP faults' connections (docs/tls.md): a ClientHello is always
  // recognised (pass-through: matched by SNI for delay and reset); with
  // terminate_tls the proxy ends it with a leaf of the local CA and verifies the
  // upstream against the system store plus upstream_ca.
  bool terminate_tls = false;
  std::string upstream_ca;  // a PEM file of roots added for the upstream (--upstream-ca)
  uint64_t duration_ns = 0;
  // Scope: an existing cgroup v2 (path below the mount or absolute), a command run
  // in a fresh cgroup, or neither: host-wide (the root cgroup).
  std::string cgroup;
  std::vector<std::string> command;
  // After the end, how long open connections may finish, clean, through the proxy
  // before the rest are closed.
  uint64_t drain_ns = 5'000'000'000ULL;

  [[nodiscard]] std::string scope_text() const;
  // "latency 200ms±20ms downstream, reset_peer ... on TCP to db:5432, host-wide"
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] nlohmann::json toxics_json() const;  // the toxics, or the HTTP faults
  [[nodiscard]] bool http() const { return !http_faults.empty(); }
};

}  // namespace faultline
