// The host resource faults in the state folder, as every invocation's sweep,
// status, abort and uninstall see them.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"

namespace faultline {

// The sweep every invocation starts with (see sweep_resource_faults); notes go to err.
void sweep_resource_state(std::ostream& err);

// For faultctl status: the resource faults in the state folder.
[[nodiscard]] nlohmann::json resource_status_json();
void print_resource_status(std::ostream& out);
[[nodiscard]] bool has_resource_faults();

// For abort: "r7" ends one resource fault, saying so on out (or why not on err); an exit code.
[[nodiscard]] bool is_resource_fault_id(const std::string& id);
int abort_resource_fault(const std::string& id, std::ostream& out, std::ostream& err);
// Reverts every resource fault; the number reverted, or the first failure.
[[nodiscard]] Result<int> abort_all_resource_faults();

}  // namespace faultline
