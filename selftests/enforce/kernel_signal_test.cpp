// The retransmit-rate guardrail (KernelSignalGuardrail, loaded directly): a TCP
// stream over a veth pair is healthy, then `faultctl run loss --percent 50`
// makes it retransmit and sample() turns unhealthy. A second, clean pair in
// other namespaces streams at the same time and its guard stays healthy.
#include "userspace/guardrails/kernel_signal.h"

#include <cstdio>

#include "enforce_env.h"

namespace flenf {
namespace {

class KernelSignalTest : public EnforceTest {};

// Retransmits per second. Under heavy loss one paced stream swings between 0.5
// and 25/s as its RTO backs off (at 50% it once stayed under 2/s for 15 s,
// deep in backoff); at 25% it keeps retransmitting. A clean one makes none, so
// 1/s still tells the two apart with room on both sides.
constexpr double kAbortAbove = 1;

// Two namespaces, a veth pair between them on 198.18.<subnet>.0/24, and a TCP
// stream from a to b.
struct TcpStream {
  const std::string addr_b;
  Netns a, b;
  VethPair link;
  ChildProcess sink, sender;
  TcpStream(const std::string& tag, int subnet, double seconds)
      : addr_b(veth_addr(subnet, 'b')),
        a(unique_name(tag + "a")),
        b(unique_name(tag + "b")),
        link(a, veth_end(subnet, 'a'), b, veth_end(subnet, 'b')),
        sink(spawn({kProbe, "--netns", b.name(), "tcpsink", "5001"})),
        sender(start_sender(seconds)) {}

 private:
  ChildProcess start_sender(double seconds) {
    EXPECT_TRUE(sink.wait_for("LISTENING", 10s)) << sink.describe();
    // 2 MB/s: a clean path then carries it without a single retransmit.
    return spawn({kProbe, "--netns", a.name(), "tcpstream", addr_b, "5001", std::to_string(seconds), "2000"});
  }
};

TEST_F(KernelSignalTest, RetransmitRateRisesAboveTheLimitUnderLoss) {
  TcpStream lossy("ks", 77, 25), clean("kc", 78, 25);
  ASSERT_TRUE(lossy.sender.wait_for("STREAMING", 10s)) << lossy.sender.describe();
  ASSERT_TRUE(clean.sender.wait_for("STREAMING", 10s)) << clean.sender.describe();

  faultline::KernelSignalConfig cfg;
  cfg.signal = "tcp_retransmits";
  cfg.abort_above = kAbortAbove;
  cfg.window_ns = 2'000'000'000ULL;
  cfg.netns_ino = lossy.a.inode();
  auto guard = faultline::KernelSignalGuardrail::start(cfg);
  ASSERT_TRUE(guard.ok()) << guard.error().describe();
  cfg.netns_ino = clean.a.inode();
  auto control = faultline::KernelSignalGuardrail::start(cfg);
  ASSERT_TRUE(control.ok()) << control.error().describe();

  // Before the fault: both streams run clean.
  for (int i = 0; i < 6; ++i) {
    ::usleep(250'000);
    auto s = guard->sample();
    auto c = control->sample();
    EXPECT_TRUE(s.healthy) << "retransmits before any loss: " << s.problem;
    EXPECT_TRUE(c.healthy) << c.problem;
  }

  ChildProcess loss = spawn({kFaultctl, "run", "loss", "--percent", "25", "--netns", lossy.a.name(), "--target",
                             lossy.addr_b, "--duration", "15s"});
  bool breached = false;
  double peak = 0;
  std::string problem;
  for (int i = 0; i < 60 && !breached; ++i) {
    ::usleep(250'000);
    auto s = guard->sample();
    peak = std::max(peak, guard->last_rate());
    auto c = control->sample();
    EXPECT_TRUE(c.healthy) << "the clean namespace was affected: " << c.problem;
    if (!s.healthy) {
      breached = true;
      problem = s.problem;
    }
  }
  loss.stop();
  EXPECT_TRUE(breached) << "the retransmit rate peaked at " << peak << "/s, limit " << kAbortAbove << "/s\n"
                        << loss.describe();
  EXPECT_GT(guard->last_rate(), kAbortAbove);
  EXPECT_NE(problem.find("tcp_retransmits at"), std::string::npos) << problem;
  std::fprintf(stderr, "[ info ] under 25%% loss: %s (clean namespace: %.1f/s)\n", problem.c_str(),
               control->last_rate());
}

}  // namespace
}  // namespace flenf
