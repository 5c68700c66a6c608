// spec.faults of a policy file checked by the `faultctl run` parsers themselves:
// each experiment becomes the words of its run command line, and an error comes
// back at the field that was that flag.
#pragma once

#include "userspace/policy/policy.h"

namespace faultline {

// The checker parse_policy() runs on each experiment. Offline: host names in a
// packet fault's target are refused rather than resolved.
[[nodiscard]] FaultChecker run_fault_checker();

// parse_policy() under a deadline: yaml-cpp 0.7 (Debian 12's) never returns on
// some malformed flow input ("{a},\n {b}}"), so a command reading an untrusted
// file gives up after `seconds`: WHO: FILE: ... on stderr, exit 2.
[[nodiscard]] PolicyParse parse_policy_bounded(std::string_view text, const FaultChecker& check, const std::string& who,
                                               const std::string& file, int seconds = 10);

// The words `faultctl run` would get for an experiment (after "run").
[[nodiscard]] std::vector<std::string> run_words(const FaultEntry& e);

}  // namespace faultline
