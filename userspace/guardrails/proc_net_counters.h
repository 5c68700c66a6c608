// The TCP counters of one network namespace as /proc/net/snmp and
// /proc/net/netstat show them: what the kernel-signal guardrail counts from
// where its tracepoint programs cannot load.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"
#include "loader/netns.h"

namespace faultline {

// "Tcp:RetransSegs" -> 12, "TcpExt:TCPAbortOnData" -> 0, ...: the files hold
// pairs of lines, a header of names and a line of values, with the same prefix.
[[nodiscard]] Result<std::map<std::string, int64_t>> parse_proc_net_counters(std::string_view text);

class ProcNetCounters {
 public:
  // Opens both files from inside ns. A /proc/net file shows the namespace of the
  // thread that opened it for as long as it stays open, so the guardrail enters
  // the namespace once here and reads from its own namespace afterwards.
  [[nodiscard]] static Result<ProcNetCounters> open(const NetnsRef& ns);
  // Both files read again, merged.
  [[nodiscard]] Result<std::map<std::string, int64_t>> read() const;

 private:
  ProcNetCounters(UniqueFd snmp, UniqueFd netstat) : snmp_(std::move(snmp)), netstat_(std::move(netstat)) {}
  UniqueFd snmp_, netstat_;
};

}  // namespace faultline
