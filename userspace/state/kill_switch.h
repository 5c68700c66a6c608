// The kill switches outside the CLI: FAULTLINE_DISABLED in the environment and a
// kill file. Every run checks them before it applies anything, and every run
// loop and resource reaper watches the kill file while a fault is on.
#pragma once

#include <optional>
#include <string>

namespace faultline {

// FAULTLINE_KILL_FILE when set, else <state root>/kill (/run/faultline/kill).
[[nodiscard]] std::string kill_file_path();
[[nodiscard]] bool kill_file_present();

// Why no fault may start now, or nullopt: FAULTLINE_DISABLED is set to anything
// but "", "0", "false" or "no" (an unknown value disables: fail closed), or the
// kill file exists.
[[nodiscard]] std::optional<std::string> fault_start_refused();

}  // namespace faultline
