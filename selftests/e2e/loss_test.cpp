// Loss: the share of packets that never arrive matches --percent, measured at the
// far end for ICMP (ping), UDP (a counting sink) and TCP (segments host a put on
// the wire against segments host b took in, over one whole connection), and in
// the faults' own counters.
#include <thread>

#include "e2e_fixture.h"

namespace fle2e {
namespace {

class Loss : public E2eTest {};

// TCP segments one namespace put on the wire (OutSegs leaves out
// retransmissions, RetransSegs has them) and took in.
struct TcpSegments {
  uint64_t sent = 0, received = 0;
};

TcpSegments tcp_segments(const std::string& netns) {
  return {snmp_counter(netns, "Tcp", "OutSegs") + snmp_counter(netns, "Tcp", "RetransSegs"),
          snmp_counter(netns, "Tcp", "InSegs")};
}

// Two faults at once in one namespace: 30% toward b for ping and UDP, and 10% of
// TCP toward b's neighbour address. TCP gets the milder rate because at 30% it
// spends most of its time in exponential RTO backoff.
//
// TCP is measured over one whole connection, from before its SYN until both
// ends have closed: then nothing is in flight, and every segment that one end
// sent and the other never took in is one the fault dropped. That count must
// equal the fault's own `dropped` exactly, and `matched` every segment a sent.
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

  ChildProcess run = start_run("loss", {"--target", b, "--percent", "30", "--duration", "10s"});
  ASSERT_TRUE(wait_started(run));
  // Long enough for the whole connection on a loaded machine; ended by a signal
  // once both ends have closed.
  ChildProcess tcp_run = start_run("loss", {"--target", b2, "--proto", "tcp", "--percent", "10", "--duration", "60s"});
  ASSERT_TRUE(wait_started(tcp_run));
  const TcpSegments a0 = tcp_segments(net().a()), b0 = tcp_segments(net().b());
  // 2 MB in 1 KB writes: about 1500 full segments.
  ChildProcess tcp =
      spawn_testhost_on_a({"tcp-send", b2, std::to_string(kTcpSinkPort), "--bytes", "2000000", "--timeout", "45"});

  ChildProcess udp =
      spawn_testhost_on_a({"udp-send", b, std::to_string(kSinkPort), "--count", "1000", "--rate", "500"});
  const double icmp_loss = ping_loss(b, 200, "0.01");
  ASSERT_TRUE(udp.wait(10s)) << udp.describe();
  std::this_thread::sleep_for(300ms);  // the last datagrams reach the sink
  sink.signal(SIGTERM);
  ASSERT_TRUE(sink.wait(5s)) << sink.describe();
  ASSERT_TRUE(run.running()) << "the UDP and ICMP measurement outlasted the fault: " << run.describe();
  const nlohmann::json sent = last_json(udp.out());
  const nlohmann::json got = last_json(sink.out());
  ASSERT_TRUE(sent.contains("sent") && got.contains("received")) << udp.describe() << sink.describe();
  const double udp_loss = 100.0 * (1.0 - got["received"].get<double>() / sent["sent"].get<double>());
  EXPECT_NEAR(icmp_loss, 30, 15) << "ICMP echo loss " << pct(icmp_loss) << " (200 pings)";
  EXPECT_NEAR(udp_loss, 30, 7) << "UDP loss " << pct(udp_loss) << ": " << sent.dump() << " -> " << got.dump();
  EXPECT_EQ(got.value("corrupted", -1), 0) << got.dump();
  EXPECT_EQ(got.value("duplicates", -1), 0) << got.dump();
  EXPECT_EQ(sent.value("send_errors", -1), 0) << "loss must be silent to the sender (no ENOBUFS): " << sent.dump();

  // The sender exits once the sink has read every byte and closed; the sink's
  // end is gone once our last ACK reached it (a lost one costs it a FIN retransmit).
  auto tcp_status = tcp.wait(50s);
  ASSERT_TRUE(tcp_status && tcp_status->is(0)) << tcp.describe();
  std::vector<std::string> open_on_b;
  for (auto deadline = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < deadline;) {
    open_on_b = tcp_connection_states(net().b());
    if (open_on_b.empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(open_on_b.empty()) << "b still holds the connection: " << testing::PrintToString(open_on_b);
  ASSERT_TRUE(tcp_run.running()) << "the TCP connection outlasted its fault: " << tcp_run.describe();
  ASSERT_TRUE(attached_via_path())
      << "our program was detached during the measurement (by another faultctl uninstall?)";
  const TcpSegments a1 = tcp_segments(net().a()), b1 = tcp_segments(net().b());
  tcp_run.signal(SIGTERM);

  const uint64_t data_sent = a1.sent - a0.sent, data_got = b1.received - b0.received;
  const uint64_t acks_sent = b1.sent - b0.sent, acks_got = a1.received - a0.received;
  const double tcp_loss = 100.0 * static_cast<double>(data_sent - data_got) / static_cast<double>(data_sent);
  std::printf(
      "[ measure  ] loss (%s): ICMP %s of 200, UDP %s of %s, TCP %s of %llu segments a->b, "
      "%llu of %llu lost b->a\n",
      attach().c_str(), pct(icmp_loss).c_str(), pct(udp_loss).c_str(), sent["sent"].dump().c_str(),
      pct(tcp_loss).c_str(), static_cast<unsigned long long>(data_sent),
      static_cast<unsigned long long>(acks_sent - acks_got), static_cast<unsigned long long>(acks_sent));
  ASSERT_GE(data_sent, 1000u) << "too few TCP segments to measure";
  ASSERT_GE(data_sent, data_got) << "b took in more segments than a sent: another TCP flow in the namespaces?";
  ASSERT_GE(acks_sent, acks_got) << "a took in more segments than b sent: another TCP flow in the namespaces?";
  EXPECT_NEAR(tcp_loss, 10, 4) << "TCP segments a->b lost: " << data_sent - data_got << " of " << data_sent;

  auto st = run.wait(15s);
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(0)) << "a completed experiment exits 0: " << run.describe();
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_EQ((*ended)["reason"], "completed");
  double matched = (*ended)["counters"]["matched"].get<double>();
  double dropped = (*ended)["counters"]["dropped"].get<double>();
  EXPECT_EQ(matched, 1200) << "every ping and datagram toward b, and nothing else: " << ended->dump();
  EXPECT_NEAR(100.0 * dropped / matched, 30, 5) << "the fault's own counters: " << ended->dump();

  st = tcp_run.wait(15s);
  ASSERT_TRUE(st) << tcp_run.describe();
  ended = ended_event(tcp_run);
  ASSERT_TRUE(ended) << tcp_run.describe();
  EXPECT_EQ((*ended)["reason"].get<std::string>().rfind("interrupted", 0), 0u) << ended->dump();
  matched = (*ended)["counters"]["matched"].get<double>();
  dropped = (*ended)["counters"]["dropped"].get<double>();
  EXPECT_EQ(dropped, static_cast<double>(data_sent - data_got + acks_sent - acks_got))
      << "every segment the fault dropped, and no other, went missing on the wire: " << ended->dump();
  EXPECT_EQ(matched, static_cast<double>(data_sent))
      << "the fault (--direction egress, the default) saw every segment a sent, and only those: " << ended->dump();
  EXPECT_EQ(acks_got, acks_sent) << "b's segments toward a pass untouched under --direction egress";

  expect_nothing_left("after the experiments ended");
  EXPECT_EQ(ping_loss(b, 20, "0.01"), 0) << "traffic must pass untouched once the fault has ended";
}

FLE2E_ON_BOTH_ATTACH_PATHS(Loss);

}  // namespace
}  // namespace fle2e
