// The life of a fault seen from outside the run: status from another process,
// the in-kernel deadman after kill -9, abort by ID, abort --all, and SIGTERM.
// Recovery is timed with 1 ms UDP probes; each probe carries its send time.
#include <signal.h>

#include "e2e_fixture.h"

namespace fle2e {
namespace {

double ms_between(uint64_t from, uint64_t to) { return (static_cast<double>(to) - static_cast<double>(from)) / 1e6; }

class Lifecycle : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    start_server({"udp-echo", std::to_string(kEchoPort)});
  }
};

TEST_P(Lifecycle, StatusFromAnotherProcessShowsTheFaultAndItsCounters) {
  const std::string b = kAddrB;
  ChildProcess run = start_run("loss", {"--target", b, "--percent", "50", "--duration", "3s"});
  auto started = wait_started(run);
  ASSERT_TRUE(started);
  const double loss = ping_loss(b, 40, "0.01");
  ASSERT_GT(loss, 0) << "the fault is not dropping anything";

  auto r = faultctl({"status", "--json"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.describe();
  EXPECT_EQ(j["installed"], true);
  EXPECT_EQ(j["armed"], true);
  ASSERT_EQ(j["faults"].size(), 1u) << j.dump(2);
  const auto& f = j["faults"][0];
  EXPECT_EQ(f["id"], (*started)["id"]);
  EXPECT_EQ(f["kind"], "loss");
  EXPECT_EQ(f["active"], true);
  EXPECT_EQ(f["mechanism"], attach());
  EXPECT_EQ(f["netns"], net().a());
  EXPECT_EQ(f["owner_pid"], run.pid());
  EXPECT_LE(f["left_s"].get<int>(), 3);
  EXPECT_GE(f["counters"]["matched"].get<int>(), 40) << "one per echo request: " << f.dump();
  EXPECT_GT(f["counters"]["dropped"].get<int>(), 0) << f.dump();
  EXPECT_LT(f["counters"]["dropped"].get<int>(), f["counters"]["matched"].get<int>()) << f.dump();
  EXPECT_GT(j["drop_reasons"]["loss"].get<int>(), 0) << j.dump();

  auto table = faultctl({"status"});
  ASSERT_TRUE(table.status.is(0)) << table.describe();
  EXPECT_NE(table.out.find("loss"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(b), std::string::npos) << "the scope names the target: " << table.out;

  auto st = run.wait(10s);
  ASSERT_TRUE(st && st->is(0)) << run.describe();
  auto after = faultctl({"status", "--json"});
  auto aj = nlohmann::json::parse(after.out, nullptr, false);
  ASSERT_TRUE(aj.is_object()) << after.describe();
  EXPECT_EQ(aj["installed"], false) << aj.dump();
  EXPECT_TRUE(aj["faults"].empty()) << aj.dump();
}

// kill -9 leaves no userspace at all; the kernel still ends the fault at expires_ns.
TEST_P(Lifecycle, KillNineMidRunAndTheKernelStillEndsTheFaultOnTime) {
  const std::string b = kAddrB;
  UdpProbe probe(net().a(), b, kEchoPort);
  ASSERT_TRUE(probe.reachable(1s)) << "no baseline";

  ChildProcess run = start_run("partition", {"--target", b, "--duration", "3s"});
  auto started = wait_started(run);
  ASSERT_TRUE(started);
  // The exact instant the kernel will stop applying the fault, from the pinned entry.
  auto expiry = fault_expiry_mono(bpffs_root(), (*started)["id"].get<uint32_t>());
  ASSERT_TRUE(expiry) << "cannot read the fault's expires_ns under " << bpffs_root();
  ASSERT_FALSE(probe.reachable(200ms)) << "the partition is not in effect";

  run.signal(SIGKILL);
  auto st = run.wait(2s);
  ASSERT_TRUE(st && st->signal == SIGKILL) << run.describe();
  EXPECT_TRUE(processes_with_env(faultctl_env()[0]).empty())
      << "a process of this test's Faultline state is still alive";
  EXPECT_FALSE(probe.reachable(300ms)) << "with its process dead, the fault must go on until it expires";
  EXPECT_FALSE(files_under(bpffs_root()).empty()) << "the state lives in bpffs, not in the process";

  auto recovered = probe.first_answer(*expiry + 3'000'000'000ULL);
  ASSERT_TRUE(recovered) << "traffic never recovered after the expiry";
  const double late_ms = ms_between(*expiry, *recovered);
  std::printf("[ measure  ] kill -9 deadman (%s): traffic passed %.1f ms after expires_ns, no process alive\n",
              attach().c_str(), late_ms);
  EXPECT_GE(late_ms, -2) << "the fault ended before its expiry (probes go out every 1 ms)";
  EXPECT_LE(late_ms, 1000) << "traffic must recover within expiry + 1 s";
  EXPECT_TRUE(processes_with_env(faultctl_env()[0]).empty());

  // No one reaped it yet: the expired entry is still pinned until a faultctl looks.
  EXPECT_FALSE(files_under(bpffs_root()).empty());
  auto status = faultctl({"status"});
  ASSERT_TRUE(status.status.is(0)) << status.describe();
  EXPECT_NE(status.out.find("no active faults"), std::string::npos) << status.out;
  expect_nothing_left("after faultctl status reaped the expired fault");
}

TEST_P(Lifecycle, AbortByIdEndsTheFaultAtOnce) {
  const std::string b = kAddrB;
  UdpProbe probe(net().a(), b, kEchoPort);
  ChildProcess run = start_run("partition", {"--target", b, "--duration", "30s"});
  auto started = wait_started(run);
  ASSERT_TRUE(started);
  ASSERT_FALSE(probe.reachable(200ms)) << "the partition is not in effect";

  const uint64_t spawned = monotonic_ns();
  ChildProcess abort = ChildProcess::spawn({FAULTCTL_PATH, "abort", std::to_string((*started)["id"].get<int>())},
                                           {.env = faultctl_env()});
  uint64_t abort_exited = 0;
  auto recovered = probe.first_answer(spawned + 5'000'000'000ULL, 1ms, [&] {
    if (abort_exited == 0 && abort.poll_exit()) abort_exited = monotonic_ns();
  });
  auto ast = abort.wait(10s);
  if (abort_exited == 0) abort_exited = monotonic_ns();
  ASSERT_TRUE(ast && ast->is(0)) << abort.describe();
  ASSERT_TRUE(recovered) << "traffic did not recover after faultctl abort";
  std::printf("[ measure  ] abort ID (%s): recovered %.1f ms after faultctl abort started, %.1f ms after it exited\n",
              attach().c_str(), ms_between(spawned, *recovered), ms_between(abort_exited, *recovered));
  EXPECT_LE(ms_between(abort_exited, *recovered), 100) << "traffic must pass within 100 ms of the abort";
  EXPECT_LE(ms_between(spawned, *recovered), 1000) << "the abort command itself is too slow";

  auto st = run.wait(5s);
  ASSERT_TRUE(st) << "faultctl run did not notice the abort: " << run.describe();
  EXPECT_TRUE(st->is(1)) << "a run ended from outside exits 1: " << run.describe();
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_EQ((*ended)["reason"], "aborted");
}

TEST_P(Lifecycle, AbortAllEndsEveryFaultAtOnce) {
  const std::string b = kAddrB, b2 = kAddrB2;
  UdpProbe probe_b(net().a(), b, kEchoPort);
  UdpProbe probe_b2(net().a(), b2, kEchoPort);
  ASSERT_TRUE(probe_b.reachable(1s) && probe_b2.reachable(1s)) << "no baseline";
  ChildProcess run1 = start_run("partition", {"--target", b, "--duration", "30s"});
  ASSERT_TRUE(wait_started(run1));
  ChildProcess run2 = start_run("flowdrop", {"--target", b2, "--duration", "30s"});
  ASSERT_TRUE(wait_started(run2));
  ASSERT_FALSE(probe_b.reachable(200ms));
  ASSERT_FALSE(probe_b2.reachable(200ms));

  const uint64_t spawned = monotonic_ns();
  ChildProcess abort = ChildProcess::spawn({FAULTCTL_PATH, "abort", "--all"}, {.env = faultctl_env()});
  uint64_t abort_exited = 0;
  auto tick = [&] {
    if (abort_exited == 0 && abort.poll_exit()) abort_exited = monotonic_ns();
  };
  auto rec_b = probe_b.first_answer(spawned + 5'000'000'000ULL, 1ms, tick);
  auto rec_b2 = probe_b2.first_answer(spawned + 5'000'000'000ULL, 1ms, tick);
  auto ast = abort.wait(10s);
  if (abort_exited == 0) abort_exited = monotonic_ns();
  ASSERT_TRUE(ast && ast->is(0)) << abort.describe();
  ASSERT_TRUE(rec_b) << "traffic to " << b << " did not recover after abort --all";
  ASSERT_TRUE(rec_b2) << "traffic to " << b2 << " did not recover after abort --all";
  std::printf(
      "[ measure  ] abort --all (%s): recovered %.1f ms after faultctl abort started, %.1f ms after it exited\n",
      attach().c_str(), ms_between(spawned, *rec_b), ms_between(abort_exited, *rec_b));
  EXPECT_LE(ms_between(abort_exited, *rec_b), 100);
  EXPECT_LE(ms_between(spawned, *rec_b), 1000);

  for (ChildProcess* run : {&run1, &run2}) {
    auto st = run->wait(5s);
    ASSERT_TRUE(st) << "faultctl run did not notice abort --all: " << run->describe();
    EXPECT_TRUE(st->is(1)) << run->describe();
  }
  expect_nothing_left("after abort --all");
}

TEST_P(Lifecycle, SigtermEndsTheFaultBeforeExit) {
  const std::string b = kAddrB;
  UdpProbe probe(net().a(), b, kEchoPort);
  ChildProcess run = start_run("partition", {"--target", b, "--duration", "30s"});
  ASSERT_TRUE(wait_started(run));
  ASSERT_FALSE(probe.reachable(200ms));

  const uint64_t signalled = monotonic_ns();
  run.signal(SIGTERM);
  uint64_t exited = 0;
  auto recovered = probe.first_answer(signalled + 5'000'000'000ULL, 1ms, [&] {
    if (exited == 0 && run.poll_exit()) exited = monotonic_ns();
  });
  auto st = run.wait(5s);
  if (exited == 0) exited = monotonic_ns();
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(1)) << "SIGTERM is handled (interrupted, exit 1), not fatal: " << run.describe();
  ASSERT_TRUE(recovered) << "traffic did not recover after SIGTERM";
  std::printf(
      "[ measure  ] SIGTERM (%s): recovered %.1f ms after the signal; the process exit was seen %.1f ms after it\n",
      attach().c_str(), ms_between(signalled, *recovered), ms_between(signalled, exited));
  // Probes go out every 1 ms and the exit is polled as often: recovery at or
  // before the exit means the fault was ended by the process, not by its expiry.
  EXPECT_LE(*recovered, exited + 5'000'000ULL) << "the fault outlived the process";
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_EQ((*ended)["reason"], "interrupted");
}

FLE2E_ON_BOTH_ATTACH_PATHS(Lifecycle);

}  // namespace
}  // namespace fle2e
