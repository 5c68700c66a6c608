// --seed with real traffic: 400 numbered UDP datagrams from one sender pinned to
// one CPU, through a 30% loss fault; the sink lists which never came. The same
// seed loses the same datagrams, another seed others, and the seed is printed,
// shown by status and carried by the started event.
#include <sched.h>

#include <thread>

#include "e2e_fixture.h"

namespace fle2e {
namespace {

constexpr int kSeedDatagrams = 400;

class SeedReplay : public E2eTest {
 protected:
  struct Run {
    std::vector<uint64_t> missing;
    nlohmann::json started, status;
    std::string status_text;
  };

  // One run of the fault with FLAGS: the sink's list of missing datagrams.
  Run lose(const std::vector<std::string>& flags, int cpu) {
    Run r;
    const std::string b = kAddrB;
    ChildProcess sink = spawn_testhost_on_b({"udp-sink", std::to_string(kSinkPort), "--expect-payload", "--timeout",
                                             "30", "--list-missing", std::to_string(kSeedDatagrams)});
    if (!sink.wait_line_starting("ready", 5s)) {
      ADD_FAILURE() << sink.describe();
      return r;
    }
    std::vector<std::string> args = {"--target",  b,    "--proto",    "udp", "--port", std::to_string(kSinkPort),
                                     "--percent", "30", "--duration", "3s"};
    args.insert(args.end(), flags.begin(), flags.end());
    ChildProcess run = start_run("loss", args);
    auto started = wait_started(run);
    if (!started) return r;
    r.started = *started;
    ChildProcess udp =
        spawn_testhost_on_a({"udp-send", b, std::to_string(kSinkPort), "--count", std::to_string(kSeedDatagrams),
                             "--rate", "2000", "--cpu", std::to_string(cpu)});
    EXPECT_TRUE(udp.wait(10s)) << udp.describe();
    EXPECT_TRUE(run.running()) << "the burst outlasted the fault: " << run.describe();
    r.status = last_json(faultctl({"status", "--json"}).out);
    r.status_text = faultctl({"status"}).out;
    std::this_thread::sleep_for(300ms);  // the last datagrams reach the sink
    sink.signal(SIGTERM);
    EXPECT_TRUE(sink.wait(5s)) << sink.describe();
    const nlohmann::json sent = last_json(udp.out()), got = last_json(sink.out());
    EXPECT_EQ(sent.value("sent", 0), kSeedDatagrams) << sent.dump();
    EXPECT_EQ(sent.value("send_errors", -1), 0) << "a silent loss, as a network's: " << sent.dump();
    if (got.contains("missing"))
      r.missing = got["missing"].get<std::vector<uint64_t>>();
    else
      ADD_FAILURE() << sink.describe();
    auto ended = run.wait(10s);
    EXPECT_TRUE(ended && ended->is(0)) << run.describe();
    return r;
  }
};

TEST_P(SeedReplay, SameSeedLosesTheSameDatagramsAnotherSeedOthers) {
  const int cpu = 0;  // exists everywhere
  Run a = lose({"--seed", "42"}, cpu);
  Run b = lose({"--seed", "42"}, cpu);
  Run c = lose({"--seed", "43"}, cpu);
  std::printf("[ measure  ] seed (%s): seed 42 lost %zu and %zu of %d, seed 43 lost %zu\n", attach().c_str(),
              a.missing.size(), b.missing.size(), kSeedDatagrams, c.missing.size());
  // 400 draws at 0.3: sd ~9, so 80..160 is far outside chance.
  EXPECT_GE(a.missing.size(), 80u);
  EXPECT_LE(a.missing.size(), 160u);
  EXPECT_EQ(a.missing, b.missing) << "the same seed, the same sender CPU: the same datagrams lost";
  EXPECT_NE(a.missing, c.missing) << "another seed loses other datagrams";

  EXPECT_EQ(a.started.value("seed", ""), "42") << a.started.dump();
  EXPECT_EQ(a.started.value("seed_source", ""), "given") << a.started.dump();
  ASSERT_EQ(a.status["faults"].size(), 1u) << a.status.dump();
  EXPECT_EQ(a.status["faults"][0].value("seed", ""), "42") << "status reads the seed back: " << a.status.dump();
  EXPECT_NE(a.status_text.find("seed 42 (replay with --seed 42)"), std::string::npos) << a.status_text;
  expect_nothing_left("after three seeded runs");
}

TEST_P(SeedReplay, DrawnSeedIsPrintedAndReplays) {
  Run first = lose({}, 0);
  EXPECT_EQ(first.started.value("seed_source", ""), "drawn") << first.started.dump();
  const std::string seed = first.started.value("seed", "");
  ASSERT_FALSE(seed.empty()) << first.started.dump();
  Run again = lose({"--seed", seed}, 0);
  EXPECT_EQ(first.missing, again.missing) << "--seed " << seed << " replays the drawn run";
  expect_nothing_left("after the replay");
}

// Programs attached before fl_rng existed (simulated, as for fl_budget, by
// unpinning the map under a running fault): a fault with a random decision is
// refused there, naming the device; a partition still runs.
TEST_P(SeedReplay, SeededFaultIsRefusedOnProgramsThatDoNotReadTheGeneratorMap) {
  ChildProcess run = start_run("partition", {"--target", kAddrB, "--duration", "4s"});
  ASSERT_TRUE(wait_started(run));
  ASSERT_EQ(::unlink((bpffs_root() + "/maps/fl_rng").c_str()), 0) << std::strerror(errno);
  auto seeded = faultctl({"run", "loss", "--netns", net().a(), "--attach", attach(), "--target", kAddrB2, "--percent",
                          "30", "--seed", "5", "--duration", "3s"});
  EXPECT_FALSE(seeded.status.is(0)) << seeded.describe();
  EXPECT_NE(seeded.err.find("--seed 5: the program on " + std::string(kDevA)), std::string::npos) << seeded.describe();
  EXPECT_NE(seeded.err.find("older faultctl"), std::string::npos) << seeded.describe();
  EXPECT_EQ(last_json(faultctl({"status", "--json"}).out)["faults"].size(), 1u)
      << "nothing of the refused fault is left";
  auto ended = run.wait(10s);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_TRUE(ended->is(0)) << run.describe();
  expect_nothing_left("after the refusal and the partition's end");
}

FLE2E_ON_BOTH_ATTACH_PATHS(SeedReplay);

}  // namespace
}  // namespace fle2e
