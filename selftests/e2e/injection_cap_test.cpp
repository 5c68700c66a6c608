// --max-injections and --start-after with real traffic: UDP datagrams from host a
// to a counting sink on host b; the sink's count says how many the fault took.
#include <unistd.h>

#include <cstring>
#include <thread>

#include "e2e_fixture.h"

namespace fle2e {
namespace {

class InjectionCap : public E2eTest {};

TEST_P(InjectionCap, HundredPercentLossWithACapOfTwentyLosesExactlyTwenty) {
  const std::string b = kAddrB;
  ChildProcess sink =
      spawn_testhost_on_b({"udp-sink", std::to_string(kSinkPort), "--expect-payload", "--timeout", "30"});
  ASSERT_TRUE(sink.wait_line_starting("ready", 5s)) << sink.describe();
  ChildProcess run = start_run("loss", {"--target", b, "--proto", "udp", "--port", std::to_string(kSinkPort),
                                        "--percent", "100", "--max-injections", "20", "--duration", "6s"});
  auto started = wait_started(run);
  ASSERT_TRUE(started);
  EXPECT_EQ((*started)["max_injections"], 20) << "the started event carries the cap: " << started->dump();

  ChildProcess udp = spawn_testhost_on_a({"udp-send", b, std::to_string(kSinkPort), "--count", "500", "--rate", "500"});
  ASSERT_TRUE(udp.wait(10s)) << udp.describe();
  ASSERT_TRUE(run.running()) << "the burst outlasted the fault: " << run.describe();

  // Another shell sees the cap reached while the fault is still installed.
  auto st = faultctl({"status", "--json"});
  ASSERT_TRUE(st.status.is(0)) << st.describe();
  const nlohmann::json status = last_json(st.out);
  ASSERT_EQ(status["faults"].size(), 1u) << status.dump();
  const nlohmann::json& f = status["faults"][0];
  EXPECT_EQ(f["active"], true) << "a spent cap leaves the fault installed until its duration ends";
  EXPECT_EQ(f["max_injections"], 20) << f.dump();
  EXPECT_EQ(f["cap"]["reached"], true) << f.dump();
  EXPECT_EQ(f["cap"]["injected"], 20) << f.dump();
  EXPECT_TRUE(f["cap"].contains("reached_at")) << f.dump();
  auto table = faultctl({"status"});
  EXPECT_NE(table.out.find("cap reached: 20 injections at "), std::string::npos) << table.describe();

  std::this_thread::sleep_for(300ms);  // the last datagrams reach the sink
  sink.signal(SIGTERM);
  ASSERT_TRUE(sink.wait(5s)) << sink.describe();
  const nlohmann::json sent = last_json(udp.out());
  const nlohmann::json got = last_json(sink.out());
  ASSERT_TRUE(sent.contains("sent") && got.contains("received")) << udp.describe() << sink.describe();
  const int64_t lost = sent["sent"].get<int64_t>() - got["received"].get<int64_t>();
  std::printf("[ measure  ] cap (%s): %lld of %lld datagrams lost under --percent 100 --max-injections 20\n",
              attach().c_str(), static_cast<long long>(lost), static_cast<long long>(sent["sent"].get<int64_t>()));
  EXPECT_EQ(sent["sent"], 500) << sent.dump();
  EXPECT_EQ(sent.value("send_errors", -1), 0) << sent.dump();
  EXPECT_EQ(lost, 20) << "exactly the cap is lost, the rest passes: " << sent.dump() << " -> " << got.dump();

  auto ended_status = run.wait(10s);
  ASSERT_TRUE(ended_status) << run.describe();
  EXPECT_TRUE(ended_status->is(0)) << run.describe();
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_EQ((*ended)["reason"], "completed");
  EXPECT_EQ((*ended)["counters"]["dropped"], 20) << ended->dump();
  EXPECT_EQ((*ended)["counters"]["matched"], 500) << ended->dump();
  EXPECT_EQ((*ended)["cap"]["reached"], true) << ended->dump();
  EXPECT_EQ((*ended)["cap"]["spared"], 480) << ended->dump();
  expect_nothing_left("after the capped fault completed");
}

TEST_P(InjectionCap, DelayedStartLetsTrafficPassUntilItsTime) {
  const std::string b = kAddrB;
  ChildProcess run = start_run("partition", {"--target", b, "--start-after", "2s", "--duration", "4s"});
  ASSERT_TRUE(wait_started(run));
  EXPECT_EQ(ping_loss(b, 10, "0.05"), 0) << "before --start-after the fault is inert";
  auto st = faultctl({"status", "--json"});
  const nlohmann::json status = last_json(st.out);
  ASSERT_EQ(status["faults"].size(), 1u) << status.dump();
  EXPECT_GT(status["faults"][0].value("starts_in_s", 0), 0) << status.dump();
  EXPECT_EQ(status["faults"][0]["counters"]["matched"], 0) << "an inert fault matches nothing: " << status.dump();
  std::this_thread::sleep_for(1800ms);  // past the start, with a margin under the 4 s duration
  EXPECT_EQ(ping_loss(b, 10, "0.05"), 100) << "after --start-after the partition holds";
  auto ended_status = run.wait(10s);
  ASSERT_TRUE(ended_status) << run.describe();
  EXPECT_TRUE(ended_status->is(0)) << run.describe();
  expect_nothing_left("after the delayed fault completed");
}

// State whose programs were attached before fl_budget existed: simulated by
// unpinning fl_budget under a running fault, so the attached programs keep a map
// that is no longer the pinned one (the next faultctl pins a fresh fl_budget, as
// it does for state from before the map). A capped fault must be refused there,
// naming the flag and the device, and the running fault must go on untouched.
TEST_P(InjectionCap, CapIsRefusedOnProgramsThatDoNotReadTheBudgetMap) {
  const std::string b = kAddrB;
  ChildProcess run = start_run("partition", {"--target", b, "--duration", "5s"});
  ASSERT_TRUE(wait_started(run));
  ASSERT_EQ(::unlink((bpffs_root() + "/maps/fl_budget").c_str()), 0) << std::strerror(errno);
  auto capped = faultctl({"run", "loss", "--netns", net().a(), "--attach", attach(), "--target", kAddrB2, "--percent",
                          "100", "--max-injections", "5", "--duration", "3s"});
  EXPECT_FALSE(capped.status.is(0)) << capped.describe();
  EXPECT_NE(capped.err.find("--max-injections: the program on " + std::string(kDevA)), std::string::npos)
      << capped.describe();
  EXPECT_NE(capped.err.find("older faultctl"), std::string::npos) << capped.describe();
  auto delayed = faultctl({"run", "loss", "--netns", net().a(), "--attach", attach(), "--target", kAddrB2, "--percent",
                           "100", "--start-after", "1s", "--duration", "3s"});
  EXPECT_FALSE(delayed.status.is(0)) << delayed.describe();
  EXPECT_NE(delayed.err.find("--start-after: the program on"), std::string::npos) << delayed.describe();
  EXPECT_EQ(ping_loss(b, 5, "0.05"), 100) << "the running partition goes on";
  auto st = faultctl({"status", "--json"});
  EXPECT_EQ(last_json(st.out)["faults"].size(), 1u) << "nothing of the refused faults is left: " << st.describe();
  auto ended = run.wait(10s);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_TRUE(ended->is(0)) << run.describe();
  expect_nothing_left("after the refusals and the partition's end");
}

FLE2E_ON_BOTH_ATTACH_PATHS(InjectionCap);

}  // namespace
}  // namespace fle2e
