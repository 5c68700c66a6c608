// Corrupt and duplicate, as the receiver sees them: fl-testhost udp-sink checks
// every datagram against its known pattern and counts repeated sequence numbers.
// A corrupted datagram may instead die in the receiver's UDP checksum check; the
// namespace's InCsumErrors counter is evidence of that.
#include "e2e_fixture.h"

namespace fle2e {
namespace {

constexpr int kDatagrams = 600;

class Corrupt : public E2eTest {};

TEST_P(Corrupt, ReceiverSeesAlteredDatagrams) {
  const std::string b = kAddrB;
  ChildProcess sink =
      spawn_testhost_on_b({"udp-sink", std::to_string(kSinkPort), "--expect-payload", "--timeout", "20"});
  ASSERT_TRUE(sink.wait_line_starting("ready", 5s)) << sink.describe();
  const uint64_t csum0 = snmp_counter(net().b(), "Udp", "InCsumErrors");

  ChildProcess run = start_run("corrupt", {"--target", b, "--proto", "udp", "--percent", "50", "--duration", "3s"});
  ASSERT_TRUE(wait_started(run));
  auto udp = testhost_on_a({"udp-send", b, std::to_string(kSinkPort), "--count", std::to_string(kDatagrams), "--rate",
                            "1000", "--size", "200"});
  ASSERT_TRUE(udp.status.is(0)) << udp.describe();
  ASSERT_TRUE(run.running()) << "the traffic outlasted the fault: " << run.describe();
  sink.signal(SIGTERM);
  ASSERT_TRUE(sink.wait(5s)) << sink.describe();
  const uint64_t csum_errors = snmp_counter(net().b(), "Udp", "InCsumErrors") - csum0;
  const nlohmann::json got = last_json(sink.out());
  ASSERT_TRUE(got.contains("corrupted")) << sink.describe();

  const double altered = got["corrupted"].get<double>() + static_cast<double>(csum_errors);
  std::printf(
      "[ measure  ] corrupt (%s): %.0f of %d datagrams altered: %s reached the sink corrupted, %llu died in "
      "the UDP checksum check\n",
      attach().c_str(), altered, kDatagrams, got["corrupted"].dump().c_str(),
      static_cast<unsigned long long>(csum_errors));
  EXPECT_NEAR(100.0 * altered / kDatagrams, 50, 9)
      << "corrupted at the sink " << got["corrupted"] << ", UDP checksum errors " << csum_errors << ": " << got.dump();
  EXPECT_EQ(got["valid"].get<double>() + altered, kDatagrams) << "corruption must neither lose nor add datagrams";
  EXPECT_EQ(got["duplicates"], 0) << got.dump();

  auto st = run.wait(10s);
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(0)) << run.describe();
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_EQ((*ended)["counters"]["corrupted"].get<double>(), altered)
      << "the fault's counter against the receiver: " << ended->dump();
}

class Duplicate : public E2eTest {};

TEST_P(Duplicate, ReceiverSeesEachSequenceNumberTwice) {
  const std::string b = kAddrB;
  ChildProcess sink =
      spawn_testhost_on_b({"udp-sink", std::to_string(kSinkPort), "--expect-payload", "--timeout", "20"});
  ASSERT_TRUE(sink.wait_line_starting("ready", 5s)) << sink.describe();

  ChildProcess run = start_run("duplicate", {"--target", b, "--proto", "udp", "--percent", "50", "--duration", "3s"});
  ASSERT_TRUE(wait_started(run));
  auto udp = testhost_on_a(
      {"udp-send", b, std::to_string(kSinkPort), "--count", std::to_string(kDatagrams), "--rate", "1000"});
  ASSERT_TRUE(udp.status.is(0)) << udp.describe();
  ASSERT_TRUE(run.running()) << "the traffic outlasted the fault: " << run.describe();
  sink.signal(SIGTERM);
  ASSERT_TRUE(sink.wait(5s)) << sink.describe();
  const nlohmann::json got = last_json(sink.out());
  ASSERT_TRUE(got.contains("duplicates")) << sink.describe();

  std::printf("[ measure  ] duplicate (%s): %s duplicates of %d datagrams at the sink\n", attach().c_str(),
              got["duplicates"].dump().c_str(), kDatagrams);
  EXPECT_EQ(got["unique"], kDatagrams) << "every datagram arrives at least once: " << got.dump();
  EXPECT_EQ(got["corrupted"], 0) << "a duplicate is an exact copy: " << got.dump();
  EXPECT_NEAR(100.0 * got["duplicates"].get<double>() / kDatagrams, 50, 9) << got.dump();

  auto st = run.wait(10s);
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(0)) << run.describe();
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_EQ((*ended)["counters"]["duplicated"], got["duplicates"])
      << "the fault's counter against the receiver: " << ended->dump();
}

FLE2E_ON_BOTH_ATTACH_PATHS(Corrupt);
FLE2E_ON_BOTH_ATTACH_PATHS(Duplicate);

}  // namespace
}  // namespace fle2e
