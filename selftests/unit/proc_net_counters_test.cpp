// The kernel signal's procfs source: /proc/net/snmp and /proc/net/netstat text,
// and the counters each signal is made of.
#include "userspace/guardrails/proc_net_counters.h"

#include <gtest/gtest.h>

#include "userspace/guardrails/kernel_signal.h"

namespace faultline {
namespace {

constexpr const char* kSnmp =
    "Ip: Forwarding DefaultTTL\n"
    "Ip: 1 64\n"
    "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs "
    "OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
    "Tcp: 1 200 120000 -1 10 10 2 7 1 500 480 33 0 40 0\n";
constexpr const char* kNetstat =
    "TcpExt: SyncookiesSent TCPAbortOnData TCPAbortOnClose TCPAbortOnMemory TCPAbortOnTimeout TCPAbortOnLinger\n"
    "TcpExt: 0 1 2 0 1 0\n";

TEST(ProcNetCounters, ParsesPairsOfLines) {
  auto c = parse_proc_net_counters(kSnmp);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->at("Tcp:RetransSegs"), 33);
  EXPECT_EQ(c->at("Tcp:MaxConn"), -1);
  EXPECT_EQ(c->at("Ip:DefaultTTL"), 64);
  for (const char* bad : {"Tcp: A B\n", "Tcp: A B\nTcp: 1\n", "Tcp: A\nUdp: 1\n", "Tcp: A\nTcp: x\n"})
    EXPECT_FALSE(parse_proc_net_counters(bad).ok()) << bad;
}

TEST(ProcNetCounters, SignalTotals) {
  auto c = parse_proc_net_counters(kSnmp);
  auto x = parse_proc_net_counters(kNetstat);
  ASSERT_TRUE(c.ok() && x.ok());
  c->merge(*x);
  EXPECT_EQ(procfs_signal_total("tcp_retransmits", *c), 33);
  // OutRsts 40 + EstabResets 7 - the host's own aborts (1 + 2 + 0 + 1 + 0).
  EXPECT_EQ(procfs_signal_total("tcp_resets", *c), 43);
}

}  // namespace
}  // namespace faultline
