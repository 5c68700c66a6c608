// --tls, --terminate-tls and --upstream-ca of `faultctl run http` and `faultctl
// guard`: checked at parse time, so a bad file or a fault that cannot apply to
// the TLS it would meet is refused before anything is made.
#pragma once

#include <string>

#include "base/result.h"
#include "userspace/faults/stream/spec.h"
#include "userspace/faults/stream/spec_check.h"  // target_is_tls, check_fault_on_tls
#include "userspace/proxy/http_fault.h"

namespace faultline {

// --upstream-ca FILE: a readable PEM file of certificates, and only with
// --terminate-tls (pass-through never verifies anything: the client does):
// check_upstream_ca_flags(), then the file loaded as termination loads it.
[[nodiscard]] Status check_upstream_ca(bool terminate, bool given, const std::string& file);

}  // namespace faultline
