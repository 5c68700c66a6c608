// `faultctl run latency|bandwidth --via proxy`: the packet fault as a TCP stream
// fault (faults/stream), for a kernel without sch_fq or when asked.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/faults/packet/spec.h"
#include "userspace/faults/stream/spec.h"

namespace faultline {

// The stream fault that stands for a latency or bandwidth fault: TCP connects
// of this host to the targets are intercepted host-wide (or in --cgroup), and the
// delay or rate applies to what this host sends them (upstream, as egress EDT
// would). given: the flags on the command line; one the proxy cannot honour
// (--dev, --netns, --source, --direction ingress, --proto udp, a given --seed,
// --max-injections, --start-after) is bad input, naming it.
[[nodiscard]] Result<TcpFaultSpec> stream_fault_for(const FaultSpec& spec, const std::vector<std::string>& given);

// What the stream fault does differently from the packet fault, for the notice.
[[nodiscard]] std::string stream_fault_notice(const FaultSpec& spec, bool chosen_automatically);

}  // namespace faultline
