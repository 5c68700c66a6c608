// --tls, --terminate-tls and --upstream-ca of `faultctl run http` and `faultctl
// guard`: checked at parse time, so a bad file or a fault that cannot apply to
// the TLS it would meet is refused before anything is made.
#pragma once

#include <string>

#include "base/result.h"
#include "userspace/faults/stream/spec.h"
#include "userspace/proxy/http_fault.h"

namespace faultline {

// --upstream-ca FILE: a readable PEM file of certificates, and only with
// --terminate-tls (pass-through never verifies anything: the client does).
[[nodiscard]] Status check_upstream_ca(bool terminate, bool given, const std::string& file);

// Whether the connections to the target are TLS: declared (--tls), or the port is 443.
[[nodiscard]] bool target_is_tls(const TcpTarget& target, bool declared);

// A fault on TLS connections that are not terminated can only be a delay
// before the request or a reset, matched on the host (the SNI). Refused
// otherwise, naming the fault's flag and the way out:
// "--status on api.example.com:443: a status fault needs the request's content,
// which TLS hides without --terminate-tls (matched by SNI: delay and reset only)".
[[nodiscard]] Status check_fault_on_tls(const HttpFault& f, const std::string& fault_flag, const std::string& target);

}  // namespace faultline
