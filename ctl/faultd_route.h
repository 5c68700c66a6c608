// faultctl commands that faultd also serves (status, abort, features) ask faultd
// first when its socket answers, and run standalone when it does not. Either
// way the same library function produced the output, so it is the same.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace faultline {

// GET target from faultd and print the body on stdout: the exit code, or
// nothing when faultd is not there (or not usable): then run standalone.
[[nodiscard]] std::optional<int> report_via_faultd(const std::string& target);
// POST target to faultd; print its output and errors as the command would: the
// exit code, or nothing when faultd is not there.
[[nodiscard]] std::optional<int> command_via_faultd(const std::string& target);

// `faultctl run` through faultd: request is the typed experiment and how to
// print it (userspace/daemon/served_run.h), built by run_packet.cpp. faultd prints what the run
// prints, here, as it comes; SIGINT, SIGTERM and SIGHUP go to faultd, which
// ends the fault as a standalone run would. The exit code, or nothing when
// faultd did not take the run (then nothing was applied: run standalone).
[[nodiscard]] std::optional<int> run_via_faultd(const nlohmann::json& request);

}  // namespace faultline
