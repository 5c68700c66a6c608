// What each kind of fault runs on with this kernel: the capability ladders of
// docs/kernel-support.md, best rung first, decided from the loader's probes.
#pragma once

#include <string>
#include <vector>

#include "loader/features.h"

namespace faultline {

struct Capability {
  std::string name;                 // "packet faults"
  std::vector<std::string> ladder;  // mechanisms, best first
  std::string chosen;               // the one this kernel gets, or "" for none
  std::string why;                  // why the better ones are out, or how to get one
};

// The capability table for these features; the packet faults row comes first.
[[nodiscard]] std::vector<Capability> capabilities(const Features& f);

}  // namespace faultline
