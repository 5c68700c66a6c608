// The brakes of a syscall fault (--after, --max-injections, --start-after) as
// the kernel rungs hand them to their programs, and read back.
#include "userspace/faults/syscall/rung.h"

namespace faultline {

fl_call_budget call_budget(const SyscallFaultSpec& spec, uint64_t armed_ns) {
  fl_call_budget b{};
  b.after = spec.after;
  b.max = spec.max_injections;
  b.start_ns = spec.start_after_ns ? armed_ns + spec.start_after_ns : 0;
  return b;
}

void add_budget_counts(RungCounts& c, const fl_call_budget& b) {
  if (b.max == 0 || b.claimed < b.max) return;
  c.cap_refused = b.claimed - b.max;
  c.reached_ns = b.reached_ns;
}

}  // namespace faultline
