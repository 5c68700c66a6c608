// Partition and flowdrop: a blackholed address answers nothing, in either
// direction as asked, while its neighbour keeps answering; both end on time.
#include "e2e_fixture.h"

namespace fle2e {
namespace {

class Partition : public E2eTest {};

TEST_P(Partition, BothDirectionsCutOnlyTheTarget) {
  const std::string b = kAddrB, b2 = kAddrB2;
  start_server({"http-server", std::to_string(kHttpPort)});
  start_server({"udp-echo", std::to_string(kEchoPort)});
  UdpProbe probe_b(net().a(), b, kEchoPort);
  ASSERT_TRUE(probe_b.reachable(1s)) << "no baseline: udp-echo on " << b << " does not answer";

  ChildProcess run = start_run("partition", {"--target", b, "--direction", "both", "--duration", "3s"});
  ASSERT_TRUE(wait_started(run));
  EXPECT_EQ(ping_loss(b, 20, "0.01"), 100) << "ping to the partitioned address";
  auto tcp = testhost_on_a({"tcp-connect", b, std::to_string(kHttpPort), "--timeout-ms", "500"});
  EXPECT_TRUE(tcp.status.is(3)) << "a TCP connect must time out (silent loss), not fail fast: " << tcp.describe();
  EXPECT_FALSE(probe_b.reachable(200ms)) << "UDP to the partitioned address";
  auto neighbour = testhost_on_a({"http-get", b2, std::to_string(kHttpPort), "--count", "3", "--interval-ms", "20"});
  EXPECT_TRUE(neighbour.status.is(0)) << "the neighbour address is not targeted: " << neighbour.describe();
  ASSERT_TRUE(run.running()) << run.describe();

  auto st = run.wait(10s);
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(0)) << run.describe();
  EXPECT_TRUE(probe_b.reachable(100ms)) << "traffic must pass once the partition has ended";
  auto after = testhost_on_a({"tcp-connect", b, std::to_string(kHttpPort), "--timeout-ms", "500"});
  EXPECT_TRUE(after.status.is(0)) << after.describe();
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_GT((*ended)["counters"]["dropped"].get<uint64_t>(), 20u) << ended->dump();
  EXPECT_EQ((*ended)["counters"]["dropped"], (*ended)["counters"]["matched"]) << "a partition drops all it matches";
}

// Ingress only: requests reach host b (its sink counts them), every answer dies on the way back.
TEST_P(Partition, IngressOnlyLetsRequestsOutAndDropsReplies) {
  const std::string b = kAddrB;
  ChildProcess sink =
      spawn_testhost_on_b({"udp-sink", std::to_string(kSinkPort), "--expect-payload", "--timeout", "20"});
  ASSERT_TRUE(sink.wait_line_starting("ready", 5s)) << sink.describe();

  // Long enough that the sends and the pings all fall inside it on a loaded
  // machine (at 2 s a slow start once let the fault end mid-ping).
  ChildProcess run = start_run("partition", {"--target", b, "--direction", "ingress", "--duration", "5s"});
  ASSERT_TRUE(wait_started(run));
  auto udp = testhost_on_a({"udp-send", b, std::to_string(kSinkPort), "--count", "200", "--rate", "1000"});
  ASSERT_TRUE(udp.status.is(0)) << udp.describe();
  EXPECT_EQ(ping_loss(b, 20, "0.01"), 100) << "echo replies come in on ingress and must be dropped";
  ASSERT_TRUE(run.running()) << run.describe();
  sink.signal(SIGTERM);
  ASSERT_TRUE(sink.wait(5s)) << sink.describe();
  auto got = last_json(sink.out());
  EXPECT_EQ(got.value("valid", 0), 200) << "egress was not targeted, so every datagram arrives: " << got.dump();

  auto st = run.wait(10s);
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(0)) << run.describe();
  EXPECT_EQ(ping_loss(b, 10, "0.01"), 0) << "after the fault";
}

class Flowdrop : public E2eTest {};

TEST_P(Flowdrop, DropsOneAddressWhileTheNeighbourStillAnswers) {
  const std::string b = kAddrB, b2 = kAddrB2;
  start_server({"http-server", std::to_string(kHttpPort)});

  ChildProcess run = start_run("flowdrop", {"--target", b, "--duration", "3s"});
  ASSERT_TRUE(wait_started(run));
  EXPECT_EQ(ping_loss(b, 20, "0.01"), 100) << "ping to the dropped address " << b;
  EXPECT_EQ(ping_loss(b2, 20, "0.01"), 0) << "ping to the neighbour " << b2 << " on the same host";
  auto dropped = testhost_on_a({"http-get", b, std::to_string(kHttpPort), "--timeout-ms", "400"});
  EXPECT_TRUE(dropped.status.is(3)) << dropped.describe();
  auto neighbour = testhost_on_a({"http-get", b2, std::to_string(kHttpPort), "--count", "5", "--interval-ms", "20"});
  EXPECT_TRUE(neighbour.status.is(0)) << neighbour.describe();
  ASSERT_TRUE(run.running()) << run.describe();

  auto st = run.wait(10s);
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(0)) << run.describe();
  auto after = testhost_on_a({"http-get", b, std::to_string(kHttpPort), "--timeout-ms", "500"});
  EXPECT_TRUE(after.status.is(0)) << "after the fault: " << after.describe();
}

FLE2E_ON_BOTH_ATTACH_PATHS(Partition);
FLE2E_ON_BOTH_ATTACH_PATHS(Flowdrop);

}  // namespace
}  // namespace fle2e
