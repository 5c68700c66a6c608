// Loss: the share of packets that never arrive matches --percent, measured at the
// far end for ICMP (ping), UDP (a counting sink) and TCP (segments host a put on
// the wire against segments host b received), and in the faults' own counters.
#include <thread>

#include "e2e_fixture.h"

namespace fle2e {
namespace {

class Loss : public E2eTest {};

// Two faults at once in one namespace: 30% toward b for ping and UDP, and 10% of
// TCP toward b's neighbour address. TCP gets the milder rate because at 30% it
// spends most of the window in exponential RTO backoff and sends too few segments
// to measure.
TEST_P(Loss, IcmpUdpAndTcpLoseTheRequestedShare) {
  const std::string b = kAddrB, b2 = kAddrB2;
  // One segment per skb, so that "segments sent" (OutSegs counts each GSO segment)
  // and "segments received" (InSegs counts each skb) measure the same thing.
  auto gso = run_command({"ip", "-n", net().a(), "link", "set", kDevA, "gso_max_segs", "1"});
  ASSERT_TRUE(gso.status.is(0)) << gso.describe();
  start_server({"tcp-sink", std::to_string(kTcpSinkPort)});
  ChildProcess sink =
      spawn_testhost_on_b({"udp-sink", std::to_string(kSinkPort), "--expect-payload", "--timeout", "30"});
  ASSERT_TRUE(sink.wait_line_starting("ready", 5s)) << sink.describe();
  // TCP connects before the fault, so a lost SYN (1 s retransmit timer) cannot eat the window.
  // The faults last 10 s for a measurement of about 4 s: on a loaded machine the
  // senders start late, and the window must still fall inside both faults.
  ChildProcess tcp = spawn_testhost_on_a({"tcp-send", b2, std::to_string(kTcpSinkPort), "--seconds", "16"});

  ChildProcess run = start_run("loss", {"--target", b, "--percent", "30", "--duration", "10s"});
  ASSERT_TRUE(wait_started(run));
  ChildProcess tcp_run = start_run("loss", {"--target", b2, "--proto", "tcp", "--percent", "10", "--duration", "10s"});
  ASSERT_TRUE(wait_started(tcp_run));
  // Segments host a put on the wire: OutSegs leaves out retransmissions, RetransSegs has them.
  auto tcp_sent_by_a = [&] {
    return snmp_counter(net().a(), "Tcp", "OutSegs") + snmp_counter(net().a(), "Tcp", "RetransSegs");
  };
  const uint64_t tcp_out0 = tcp_sent_by_a();
  const uint64_t tcp_in0 = snmp_counter(net().b(), "Tcp", "InSegs");

  ChildProcess udp =
      spawn_testhost_on_a({"udp-send", b, std::to_string(kSinkPort), "--count", "1000", "--rate", "500"});
  const double icmp_loss = ping_loss(b, 200, "0.01");
  ASSERT_TRUE(udp.wait(10s)) << udp.describe();
  // Read b before a: a segment sent between the two reads only makes the loss look larger.
  const uint64_t tcp_in1 = snmp_counter(net().b(), "Tcp", "InSegs");
  const uint64_t tcp_out1 = tcp_sent_by_a();
  ASSERT_TRUE(run.running() && tcp_run.running()) << "the measurement window outlasted the fault: " << run.describe();
  ASSERT_TRUE(attached_via_path())
      << "our program was detached during the measurement (by another faultctl uninstall?)";

  // Segments in flight at the reads count as lost above. What b receives in the
  // next 300 ms bounds them (it also holds segments sent after the reads).
  std::this_thread::sleep_for(300ms);
  const uint64_t tcp_in_late = snmp_counter(net().b(), "Tcp", "InSegs");
  sink.signal(SIGTERM);
  ASSERT_TRUE(sink.wait(5s)) << sink.describe();
  tcp.kill_and_reap();
  const nlohmann::json sent = last_json(udp.out());
  const nlohmann::json got = last_json(sink.out());
  ASSERT_TRUE(sent.contains("sent") && got.contains("received")) << udp.describe() << sink.describe();

  const double udp_loss = 100.0 * (1.0 - got["received"].get<double>() / sent["sent"].get<double>());
  const double tcp_sent = static_cast<double>(tcp_out1 - tcp_out0);
  const double tcp_loss = 100.0 * (1.0 - static_cast<double>(tcp_in1 - tcp_in0) / tcp_sent);
  std::printf("[ measure  ] loss (%s): ICMP %s of 200, UDP %s of %s, TCP %s of %.0f segments (%llu late)\n",
              attach().c_str(), pct(icmp_loss).c_str(), pct(udp_loss).c_str(), sent["sent"].dump().c_str(),
              pct(tcp_loss).c_str(), tcp_sent, static_cast<unsigned long long>(tcp_in_late - tcp_in1));
  EXPECT_NEAR(icmp_loss, 30, 15) << "ICMP echo loss " << pct(icmp_loss) << " (200 pings)";
  EXPECT_NEAR(udp_loss, 30, 7) << "UDP loss " << pct(udp_loss) << ": " << sent.dump() << " -> " << got.dump();
  EXPECT_EQ(got.value("corrupted", -1), 0) << got.dump();
  EXPECT_EQ(got.value("duplicates", -1), 0) << got.dump();
  EXPECT_EQ(sent.value("send_errors", -1), 0) << "loss must be silent to the sender (no ENOBUFS): " << sent.dump();
  EXPECT_GE(tcp_sent, 500) << "too few TCP segments to measure: " << tcp_out0 << " -> " << tcp_out1;
  // The true loss lies between tcp_loss (in-flight counted as lost) and
  // tcp_loss_low (every late arrival counted as delivered); that range must
  // meet 10% +- 5. The fault's own counters below hold the rate tightly.
  const double tcp_loss_low =
      100.0 * (1.0 - static_cast<double>(tcp_in_late - tcp_in0) / tcp_sent);
  EXPECT_GE(tcp_loss, 5) << "TCP segment loss " << pct(tcp_loss) << " (" << tcp_sent << " segments sent)";
  EXPECT_LE(tcp_loss_low, 15) << "TCP segment loss at least " << pct(tcp_loss_low) << " (" << tcp_sent
                              << " segments sent, " << tcp_in_late - tcp_in1 << " arrived after the reads)";

  for (auto [p, percent, min_matched] : {std::tuple{&run, 30.0, 1000.0}, std::tuple{&tcp_run, 10.0, 500.0}}) {
    auto st = p->wait(15s);
    ASSERT_TRUE(st) << p->describe();
    EXPECT_TRUE(st->is(0)) << "a completed experiment exits 0: " << p->describe();
    auto ended = ended_event(*p);
    ASSERT_TRUE(ended) << p->describe();
    EXPECT_EQ((*ended)["reason"], "completed");
    const double matched = (*ended)["counters"]["matched"].get<double>();
    const double dropped = (*ended)["counters"]["dropped"].get<double>();
    ASSERT_GT(matched, min_matched) << ended->dump();
    EXPECT_NEAR(100.0 * dropped / matched, percent, 5) << "the fault's own counters: " << ended->dump();
  }

  expect_nothing_left("after the experiments completed");
  EXPECT_EQ(ping_loss(b, 20, "0.01"), 0) << "traffic must pass untouched once the fault has ended";
}

FLE2E_ON_BOTH_ATTACH_PATHS(Loss);

}  // namespace
}  // namespace fle2e
