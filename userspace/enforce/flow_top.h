// faultctl top: which destinations a cgroup (or the whole host) talks to, live.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace faultline {

struct FlowTopOptions {
  std::string cgroup;  // empty: the root cgroup, i.e. the whole host
  bool once = false;   // one snapshot after `interval_ns`, then exit
  bool json = false;
  uint64_t interval_ns = 2'000'000'000ULL;
  size_t rows = 20;
};

// Counts from the moment it starts (the programs attach then). Returns an exit code.
[[nodiscard]] int run_flow_top(const FlowTopOptions& o, std::ostream& out, std::ostream& err);

}  // namespace faultline
