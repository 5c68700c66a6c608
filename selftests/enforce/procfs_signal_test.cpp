// The kernel-signal guardrail's procfs source (--signal-source procfs, and the
// fallback where tp_btf cannot load): a namespace's own /proc/net counters,
// read from the namespace the fault is in. Refused connects inside one
// namespace send resets there (Tcp:OutRsts); a second namespace stays at zero.
#include <cstdio>

#include "guardrail_env.h"
#include "userspace/guardrails/kernel_signal.h"

namespace flenf {
namespace {

// Refused connects to a port nobody listens on in the namespace: one reset each.
CommandResult refused_connects(const Netns& ns, int n) {
  return run({kProbe, "--netns", ns.name(), "connect", "tcp", "127.0.0.1", "9", std::to_string(n)}, 30s);
}

TEST_F(EnforceTest, ProcfsCountsResetsPerNamespace) {
  Netns a(unique_name("psa")), b(unique_name("psb"));
  faultline::KernelSignalConfig cfg;
  cfg.signal = "tcp_resets";
  cfg.abort_above = 20;
  cfg.window_ns = 2'000'000'000ULL;
  cfg.source = faultline::SignalSource::Procfs;
  cfg.netns = a.name();
  cfg.netns_ino = a.inode();
  auto guard = faultline::KernelSignalGuardrail::start(cfg);
  ASSERT_TRUE(guard.ok()) << guard.error().describe();
  cfg.netns = b.name();
  cfg.netns_ino = b.inode();
  auto control = faultline::KernelSignalGuardrail::start(cfg);
  ASSERT_TRUE(control.ok()) << control.error().describe();
  EXPECT_EQ(guard->source(), "procfs");
  EXPECT_EQ(guard->describe()["kernel_signal"]["netns"], a.name()) << guard->describe().dump();

  ::usleep(300'000);
  auto before = guard->sample();
  EXPECT_TRUE(before.healthy) << before.problem;
  CommandResult probe = refused_connects(a, 200);
  ASSERT_TRUE(probe.status.is(0)) << probe.describe();
  ASSERT_EQ(count_of(results(probe.out)["tcp 127.0.0.1:9"], "ECONNREFUSED"), 200) << probe.describe();
  auto after = guard->sample();
  auto other = control->sample();
  EXPECT_FALSE(after.healthy) << "200 resets in under 2s, limit 20/s: rate " << guard->last_rate();
  EXPECT_NE(after.problem.find("tcp_resets at"), std::string::npos) << after.problem;
  EXPECT_TRUE(other.healthy) << "the other namespace counted resets: " << other.problem;
  EXPECT_EQ(control->last_rate(), 0) << "the other namespace's counters moved";
  std::fprintf(stderr, "[ info ] procfs: %s; the other namespace: %.1f/s\n", after.problem.c_str(),
               control->last_rate());
}

TEST_F(EnforceTest, ARunSaysItCountsFromProcfsAndEndsOnResets) {
  Netns ns(unique_name("psr")), peer(unique_name("psrp"));
  VethPair veth(ns, veth_end(44, 'a'), peer, veth_end(44, 'b'));
  ChildProcess f = ChildProcess::spawn({kFaultctl, "run", "loss", "--netns", ns.name(), "--target", veth_addr(44, 'b'),
                                        "--percent", "10", "--duration", "60s", "--json", "--kernel-signal",
                                        "tcp_resets", "--abort-above", "20", "--signal-source", "procfs"});
  ASSERT_TRUE(f.wait_for("\"started\"", 30s)) << f.describe();
  auto started = json_event(f.out(), "started");
  ASSERT_TRUE(started) << f.describe();
  const auto& k = (*started)["guardrail"]["kernel_signal"];
  EXPECT_EQ(k["source"], "procfs") << k.dump();
  EXPECT_EQ(k["netns"], ns.name()) << k.dump();
  EXPECT_EQ(k["counters"], "Tcp:OutRsts + Tcp:EstabResets - TcpExt:TCPAbortOn*") << k.dump();
  ASSERT_TRUE(f.wait_for("\"kernel_signal\"", 10s)) << f.describe();
  ASSERT_FALSE(f.wait_for("\"ended\"", 1500ms)) << "ended before any reset\n" << f.describe();
  CommandResult probe = refused_connects(ns, 300);
  ASSERT_TRUE(probe.status.is(0)) << probe.describe();
  auto e = f.wait(30s);
  ASSERT_TRUE(e && e->is(7)) << f.describe();
  auto ended = json_event(f.out(), "ended");
  ASSERT_TRUE(ended) << f.describe();
  EXPECT_EQ((*ended)["guardrail"], "kernel signal") << ended->dump();
  EXPECT_NE(ended->value("detail", "").find("kernel signal: tcp_resets at"), std::string::npos) << ended->dump();
  EXPECT_EQ(json_events_named(f.out(), "kernel_signal").back()["source"], "procfs");
}

}  // namespace
}  // namespace flenf
