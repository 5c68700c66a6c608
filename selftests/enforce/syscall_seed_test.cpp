// --seed for syscall faults: the seccomp rung draws --percent from a seeded
// generator, so a command making the same calls gets the same answers run after
// run; the kernel rungs cannot follow a seed and say so instead of pretending.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "enforce_env.h"

namespace flenf {
namespace {

struct SeededRun {
  std::string trace;  // fl_probe's answers, in call order: "ok,EIO,ok,..."
  nlohmann::json started;
  std::string log;
  bool ok = false;
};

class SyscallSeedTest : public EnforceTest {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    file_ = "/tmp/" + unique_name("seed.txt");
    std::ofstream(file_) << "faultline\n";
  }
  void TearDown() override {
    if (!file_.empty()) ::unlink(file_.c_str());
    EnforceTest::TearDown();
  }

  // faultctl run syscall --syscall openat --errno EIO --percent 50 [FLAGS] --json
  // -- fl_probe opentrace FILE 200, to completion.
  SeededRun opens(const std::vector<std::string>& flags, int calls = 200) {
    std::vector<std::string> argv = {kFaultctl, "run",       "syscall",  "--syscall", "openat", "--errno",
                                     "EIO",     "--percent", "50",       "--duration", "60s",   "--json"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", kProbe, "opentrace", file_, std::to_string(calls)});
    CommandResult o = run(argv, 60s);
    SeededRun r;
    r.ok = o.status.is(0);
    r.log = o.describe();
    std::istringstream lines(o.out);
    const std::string prefix = "TRACE opentrace " + file_ + " ";
    for (std::string l; std::getline(lines, l);) {
      if (l.rfind(prefix, 0) == 0) r.trace = l.substr(prefix.size());
      if (l.empty() || l.front() != '{') continue;
      auto j = nlohmann::json::parse(l, nullptr, false);
      if (!j.is_discarded() && j.value("event", "") == "started") r.started = j;
    }
    return r;
  }

  static size_t failures(const std::string& trace) {
    size_t n = 0;
    for (size_t p = trace.find("EIO"); p != std::string::npos; p = trace.find("EIO", p + 1)) ++n;
    return n;
  }

  std::string file_;
};

TEST_F(SyscallSeedTest, SeccompSameSeedGivesTheSameErrnoSequence) {
  SeededRun a = opens({"--seed", "42"}), b = opens({"--seed", "42"});
  ASSERT_TRUE(a.ok) << a.log;
  ASSERT_TRUE(b.ok) << b.log;
  EXPECT_EQ(a.started.value("mechanism", ""), "seccomp") << a.log;
  EXPECT_EQ(a.started.value("seed", ""), "42") << a.log;
  EXPECT_EQ(a.started.value("seed_source", ""), "given") << a.log;
  ASSERT_FALSE(a.trace.empty()) << a.log;
  EXPECT_EQ(a.trace, b.trace) << "two runs of 200 opens at 50% under --seed 42";
  // 200 draws at 0.5: sd ~7, so 65..135 is far outside chance.
  EXPECT_GE(failures(a.trace), 65u) << a.trace;
  EXPECT_LE(failures(a.trace), 135u) << a.trace;
  SeededRun c = opens({"--seed", "43"});
  ASSERT_TRUE(c.ok) << c.log;
  EXPECT_NE(a.trace, c.trace) << "another seed, other answers";
}

TEST_F(SyscallSeedTest, DrawnSeedIsPrintedAndReplaysTheRun) {
  SeededRun first = opens({});
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_EQ(first.started.value("seed_source", ""), "drawn") << first.log;
  const std::string seed = first.started.value("seed", "");
  ASSERT_FALSE(seed.empty()) << "a run without --seed prints the seed it drew\n" << first.log;
  SeededRun replay = opens({"--seed", seed});
  ASSERT_TRUE(replay.ok) << replay.log;
  EXPECT_EQ(replay.trace, first.trace) << "--seed " << seed << " replays the drawn run";
  CommandResult text = run({kFaultctl, "run", "syscall", "--syscall", "openat", "--errno", "EIO", "--percent", "50",
                            "--seed", seed, "--duration", "10s", "--dry-run", "--", kProbe, "open", file_, "1"},
                           30s);
  EXPECT_TRUE(text.status.is(0)) << text.describe();
  EXPECT_NE(text.out.find(", seed " + seed), std::string::npos) << "the dry-run plan names the seed\n" << text.describe();
}

TEST_F(SyscallSeedTest, KernelRungsCannotFollowASeedAndSaySo) {
  // A given seed below 100%: the cgroup rung that would serve is passed over
  // for seccomp when there is a command...
  CommandResult cmd = run({kFaultctl, "run", "syscall", "--syscall", "socket", "--errno", "EMFILE", "--percent", "50",
                           "--seed", "7", "--duration", "10s", "--dry-run", "--json", "--", kProbe, "socket", "tcp", "1"},
                          30s);
  EXPECT_TRUE(cmd.status.is(0)) << cmd.describe();
  EXPECT_NE(cmd.out.find("\"mechanism\":\"seccomp\""), std::string::npos) << cmd.describe();
  EXPECT_NE(cmd.out.find("\"seed\":\"7\""), std::string::npos) << cmd.describe();
  // ... forced onto it, or with no command to wrap, it is refused.
  for (const auto& extra : std::vector<std::vector<std::string>>{{"--via", "cgroup", "--", kProbe, "socket", "tcp", "1"},
                                                                  {"--cgroup", "/"}}) {
    std::vector<std::string> argv = {kFaultctl, "run",  "syscall", "--syscall",  "socket", "--errno", "EMFILE",
                                     "--percent", "50", "--seed",  "7",          "--duration", "10s", "--dry-run"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    CommandResult o = run(argv, 30s);
    EXPECT_TRUE(o.status.is(2)) << o.describe();
    EXPECT_NE(o.err.find("--seed: the cgroup rung draws in the kernel"), std::string::npos) << o.describe();
    EXPECT_EQ(o.out.find("RESULT"), std::string::npos) << "nothing may run\n" << o.describe();
  }
  // A drawn seed is not claimed for a rung that cannot follow it.
  CommandResult drawn = run({kFaultctl, "run", "syscall", "--syscall", "socket", "--errno", "EMFILE", "--percent", "50",
                             "--duration", "10s", "--dry-run", "--json", "--", kProbe, "socket", "tcp", "1"},
                            30s);
  EXPECT_TRUE(drawn.status.is(0)) << drawn.describe();
  EXPECT_NE(drawn.out.find("\"mechanism\":\"cgroup\""), std::string::npos) << drawn.describe();
  EXPECT_EQ(drawn.out.find("\"seed\""), std::string::npos) << drawn.describe();
  EXPECT_NE(drawn.out.find("unseeded"), std::string::npos) << drawn.describe();
}

TEST_F(SyscallSeedTest, BadSeedsAreRefusedNamingTheFlag) {
  for (const auto& [seed, needle] : std::vector<std::pair<std::string, std::string>>{
           {"-1", "--seed '-1': expected a whole number from 0 to 18446744073709551615"},
           {"forty-two", "--seed 'forty-two': expected a whole number"},
           {"4.2", "--seed '4.2': expected a whole number"},
           {"18446744073709551616", "--seed 18446744073709551616: too large"}}) {
    CommandResult o = run({kFaultctl, "run", "syscall", "--syscall", "openat", "--errno", "EIO", "--percent", "50",
                           "--seed=" + seed, "--duration", "10s", "--", kProbe, "open", file_, "1"},
                          30s);
    EXPECT_TRUE(o.status.is(2)) << o.describe();
    EXPECT_NE(o.err.find(needle), std::string::npos) << "wanted '" << needle << "'\n" << o.describe();
    EXPECT_EQ(o.out.find("RESULT"), std::string::npos) << "nothing may run on bad input\n" << o.describe();
  }
}

}  // namespace
}  // namespace flenf
