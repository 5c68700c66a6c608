// Faults on this host's own addresses: the route lookup puts the program on lo
// (and nowhere else), a 100% loss to 127.0.0.1:PORT or [::1]:PORT really cuts a
// UDP and a TCP exchange with a local service, a packet on lo is faulted once,
// and a fault that matched nothing says so instead of a quiet "completed".
#include <thread>

#include "e2e_fixture.h"

namespace fle2e {
namespace {

constexpr uint16_t kLocalPort = 7311;  // udp-echo and http-server share it (UDP and TCP)

class LocalTarget : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The test hosts turn IPv6 off; ::1 needs it back on lo of host a.
    auto v6 = run_command({"ip", "netns", "exec", net().a(), "sysctl", "-qw", "net.ipv6.conf.lo.disable_ipv6=0"});
    ASSERT_TRUE(v6.status.is(0)) << v6.describe();
  }

  // Waits for "started" and checks where the kernel has our programs: on lo
  // through the attach path under test, and not on the veth no packet to a
  // local address passes.
  std::optional<nlohmann::json> wait_started_on_lo(ChildProcess& run) {
    auto started = started_line(run);
    if (!started) return std::nullopt;
    const nlohmann::json& j = *started;
    const std::string line = j.dump();
    EXPECT_EQ(j["devices"], nlohmann::json::array({"lo"})) << line;
    EXPECT_EQ(j.value("device_choice", ""), "routes") << line;
    auto on_lo = attached_netfault(net().a(), "lo");
    EXPECT_FALSE(on_lo.empty()) << "nothing of ours is attached to lo";
    for (const auto& a : on_lo) EXPECT_EQ(a.rfind(attach() + " ", 0), 0u) << a;
    EXPECT_TRUE(attached_netfault(net().a(), kDevA).empty())
        << "attached to " << kDevA << ", which no packet to a local address passes: "
        << ::testing::PrintToString(attached_netfault(net().a(), kDevA));
    return j;
  }

  // UDP: probes answered by the local udp-echo within one second.
  uint64_t udp_answers(const std::string& host) {
    auto r = testhost_on_a({"udp-watch", host, std::to_string(kLocalPort), "--seconds", "1", "--interval-ms", "20",
                            "--timeout-ms", "200"});
    EXPECT_TRUE(r.status.is(0)) << r.describe();
    return last_json(r.out).value("answered", uint64_t{0});
  }
  // TCP: one GET to the local http-server (connect, request, answer).
  bool tcp_exchange(const std::string& host) {
    auto r = testhost_on_a({"http-get", host, std::to_string(kLocalPort), "--timeout-ms", "1000"});
    return r.status.is(0);
  }

  void loss_cuts_local_udp_and_tcp(const std::string& host, const std::string& target) {
    start_server({"udp-echo", std::to_string(kLocalPort)}, false);
    start_server({"http-server", std::to_string(kLocalPort)}, false);
    ASSERT_GT(udp_answers(host), 20u) << "the local UDP service must answer before the fault";
    ASSERT_TRUE(tcp_exchange(host)) << "the local TCP service must answer before the fault";

    ChildProcess run = start_run("loss", {"--target", target, "--percent", "100", "--duration", "6s"});
    ASSERT_TRUE(wait_started_on_lo(run));
    EXPECT_EQ(udp_answers(host), 0u) << "UDP to " << target << " under 100% loss";
    EXPECT_FALSE(tcp_exchange(host)) << "TCP to " << target << " under 100% loss";
    ASSERT_TRUE(run.running()) << "the measurement outlasted the fault: " << run.describe();

    auto st = run.wait(15s);
    ASSERT_TRUE(st && st->is(0)) << run.describe();
    auto ended = ended_event(run);
    ASSERT_TRUE(ended) << run.describe();
    const auto& c = (*ended)["counters"];
    EXPECT_GT(c.value("matched", uint64_t{0}), 20u) << ended->dump();
    EXPECT_EQ(c.value("dropped", uint64_t{1}), c.value("matched", uint64_t{0})) << ended->dump();
    EXPECT_FALSE(ended->contains("untested")) << ended->dump();
    EXPECT_EQ(run.err().find("UNTESTED"), std::string::npos) << run.describe();

    EXPECT_TRUE(attached_netfault(net().a(), "lo").empty()) << "still attached to lo after the run";
    EXPECT_FALSE(has_clsact(net().a(), "lo")) << qdiscs(net().a(), "lo");
    EXPECT_GT(udp_answers(host), 20u) << "UDP must answer again after the fault";
    EXPECT_TRUE(tcp_exchange(host)) << "TCP must answer again after the fault";
  }
};

TEST_P(LocalTarget, LossCutsUdpAndTcpToALocalServiceOnIpv4) {
  loss_cuts_local_udp_and_tcp("127.0.0.1", "127.0.0.1:7311");
}

TEST_P(LocalTarget, LossCutsUdpAndTcpToALocalServiceOnIpv6) { loss_cuts_local_udp_and_tcp("::1", "[::1]:7311"); }

// On lo one packet passes egress and then ingress. A fault for both directions
// whose target is both ends (127.0.0.1, no port) must still decide once per
// packet: 50% loss loses about half, not three quarters.
TEST_P(LocalTarget, APacketOnLoIsFaultedOnce) {
  ChildProcess sink = spawn_testhost_on_a({"udp-sink", std::to_string(kLocalPort), "--timeout", "30"});
  ASSERT_TRUE(sink.wait_line_starting("ready", 5s)) << sink.describe();
  ChildProcess run = start_run("loss", {"--target", "127.0.0.1", "--proto", "udp", "--direction", "both", "--percent",
                                        "50", "--duration", "8s"});
  ASSERT_TRUE(wait_started_on_lo(run));
  auto send = testhost_on_a({"udp-send", "127.0.0.1", std::to_string(kLocalPort), "--count", "2000", "--rate", "1000"});
  ASSERT_TRUE(send.status.is(0)) << send.describe();
  std::this_thread::sleep_for(200ms);
  sink.signal(SIGTERM);
  ASSERT_TRUE(sink.wait(5s)) << sink.describe();
  const uint64_t sent = last_json(send.out).value("sent", uint64_t{0});
  const uint64_t got = last_json(sink.out()).value("received", uint64_t{0});
  ASSERT_EQ(sent, 2000u) << send.describe();
  const double loss = 100.0 * static_cast<double>(sent - got) / static_cast<double>(sent);
  std::printf("[ measure  ] lo, 50%% loss --direction both (%s): %s of %llu datagrams lost\n", attach().c_str(),
              pct(loss).c_str(), static_cast<unsigned long long>(sent));
  // 2000 packets at p = 0.5: the standard deviation is 1.1 points. Faulted twice, 75%.
  EXPECT_GT(loss, 42) << "received " << got << " of " << sent;
  EXPECT_LT(loss, 58) << "received " << got << " of " << sent << ": " << pct(loss)
                      << " lost; near 75% means each packet was faulted on egress and again on ingress";
  run.signal(SIGINT);
  ASSERT_TRUE(run.wait(10s)) << run.describe();
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  const uint64_t matched = (*ended)["counters"].value("matched", uint64_t{0});
  EXPECT_GE(matched, sent) << "every datagram is matched once";
  EXPECT_LT(matched, sent + sent / 10) << "a datagram matched on egress is not matched again on ingress";
}

// An explicit --dev still wins over the route, and then nothing to the local
// address passes there: the run says "untested" loudly, exit 0.
TEST_P(LocalTarget, DevWinsAndAFaultThatMatchedNothingSaysUntested) {
  start_server({"udp-echo", std::to_string(kLocalPort)}, false);
  ChildProcess run =
      start_run("loss", {"--dev", kDevA, "--target", "127.0.0.1:7311", "--percent", "100", "--duration", "2s"});
  ASSERT_TRUE(wait_started(run));  // on fla, as asked
  EXPECT_GT(udp_answers("127.0.0.1"), 20u) << "the fault is on " << kDevA << ", not on lo";
  auto st = run.wait(15s);
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(0)) << "an untested run keeps exit 0 (documented): " << run.describe();
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_EQ((*ended)["counters"].value("matched", uint64_t{1}), 0u) << ended->dump();
  EXPECT_EQ(ended->value("untested", false), true) << ended->dump();
  EXPECT_NE(ended->value("warning", "").find("matched no packet"), std::string::npos) << ended->dump();
  EXPECT_NE(ended->value("detail", "").find("matched no packet"), std::string::npos) << ended->dump();
  EXPECT_NE(run.err().find("WARNING: UNTESTED"), std::string::npos) << run.describe();
}

// The same in text mode, on a routed target no packet is sent to.
TEST_P(LocalTarget, TextSummaryOfAFaultThatMatchedNothing) {
  auto r = faultctl(
      {"run", "partition", "--netns", net().a(), "--attach", attach(), "--target", kAddrB2, "--duration", "1s"});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("ended (completed: the fault matched no packet"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("WARNING: UNTESTED"), std::string::npos) << r.describe();
}

// The plan shows where each target is routed, and --dry-run attaches nothing.
TEST_P(LocalTarget, DryRunShowsEachTargetsRoute) {
  auto r = faultctl({"run", "loss", "--netns", net().a(), "--attach", attach(), "--target", "127.0.0.1,::1", "--target",
                     kAddrB, "--percent", "100", "--duration", "1s", "--dry-run"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find(std::string("devices: lo ") + kDevA + " (routes)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1 -> lo (local route)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("::1 -> lo (local route)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::string(kAddrB) + " -> " + kDevA + " (unicast route)"), std::string::npos) << r.out;
  EXPECT_TRUE(attached_netfault(net().a(), "lo").empty());
  expect_nothing_left("after a dry run");
}

// A target without a route is bad input, and nothing is attached anywhere.
TEST_P(LocalTarget, ATargetWithoutARouteIsBadInput) {
  for (const std::string t : {"203.0.113.9", "2001:db8::9", "203.0.113.0/24"}) {
    auto r = faultctl({"run", "loss", "--netns", net().a(), "--attach", attach(), "--target", t, "--percent", "100",
                       "--duration", "1s"});
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find("--target " + t + ": no route"), std::string::npos) << r.describe();
  }
  EXPECT_TRUE(attached_netfault(net().a(), "lo").empty());
  expect_nothing_left("after targets without a route");
}

FLE2E_ON_BOTH_ATTACH_PATHS(LocalTarget);

}  // namespace
}  // namespace fle2e
