// faultctl abort and faultd's abort routes: end one fault (or release a guard)
// by its ID, or every fault at once (the kill switch), written once for both.
#pragma once

#include <iosfwd>
#include <string>

namespace faultline {

// N (packet), rN (resource), sN (syscall) or gN (guard).
[[nodiscard]] bool is_fault_id(const std::string& id);

// Ends the fault or releases the guard `id`: what was done on out, why not on
// err (lines starting "faultctl abort: "). The exit code: 0, 2 when no such
// fault is active, 1 on a failure.
[[nodiscard]] int abort_fault(const std::string& id, std::ostream& out, std::ostream& err);

// The kill switch: every packet and syscall fault ended, every resource fault
// reverted, Faultline removed from every device; guards stay. Same outputs.
[[nodiscard]] int abort_all_faults(std::ostream& out, std::ostream& err);

}  // namespace faultline
