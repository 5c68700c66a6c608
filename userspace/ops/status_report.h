// faultctl status and faultd's /v1/status: the active faults of every family
// and the guards, written once here for both.
#pragma once

#include <iosfwd>

namespace faultline {

// Reaps expired packet faults, then writes the status: a table, or (json) one
// JSON object on one line. Returns the exit code (always kExitCompleted today).
[[nodiscard]] int write_status(bool json, std::ostream& out);

}  // namespace faultline
