// spec.faults of a policy file checked by the `faultctl run` parsers themselves:
// each experiment becomes the words of its run command line, and an error comes
// back at the field that was that flag.
#pragma once

#include "userspace/policy/policy.h"

namespace faultline {

// The checker parse_policy() runs on each experiment. Offline: host names in a
// packet fault's target are refused rather than resolved.
[[nodiscard]] FaultChecker run_fault_checker();

// The words `faultctl run` would get for an experiment (after "run").
[[nodiscard]] std::vector<std::string> run_words(const FaultEntry& e);

}  // namespace faultline
