// faultctl features and faultd's /v1/features: the kernel probes (cached for the
// life of the process) and each capability's chosen mechanism.
#pragma once

#include <iosfwd>

namespace faultline {

// A table, or (json) one indented JSON document. Returns the exit code.
[[nodiscard]] int write_features(bool json, std::ostream& out);

}  // namespace faultline
