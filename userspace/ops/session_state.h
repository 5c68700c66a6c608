// The syscall faults and guards held by live faultctl processes, as status,
// abort and uninstall see them.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

// For faultctl status: {"syscall_faults": [...], "tcp_faults": [...], "guards": [...]}.
[[nodiscard]] nlohmann::json session_status_json();
// A table, or nothing if no session is live; true if it printed.
bool print_session_status(std::ostream& out);

// For faultctl abort sN|tN|gN; an exit code.
int abort_session_command(const std::string& id, std::ostream& out, std::ostream& err);
// The kill switch's share: ends every syscall and TCP stream fault (guards are enforcement,
// not faults, and are left alone). The number ended, or the first failure.
[[nodiscard]] Result<int> abort_all_session_faults(std::ostream& out);
// Guards still running, one line each, for uninstall to name.
[[nodiscard]] std::vector<std::string> live_guard_lines();

}  // namespace faultline
