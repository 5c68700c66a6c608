// faultctl commands that faultd also serves (status, abort, features) ask faultd
// first when its socket answers, and run standalone when it does not. Either
// way the same library function produced the output, so it is the same.
#pragma once

#include <optional>
#include <string>

namespace faultline {

// GET target from faultd and print the body on stdout: the exit code, or
// nothing when faultd is not there (or not usable): then run standalone.
[[nodiscard]] std::optional<int> report_via_faultd(const std::string& target);
// POST target to faultd; print its output and errors as the command would: the
// exit code, or nothing when faultd is not there.
[[nodiscard]] std::optional<int> command_via_faultd(const std::string& target);

}  // namespace faultline
