// --seed for syscall faults: the seccomp rung (in faultctl) and the cgroup rung
// (fl_sa_rng in the kernel) draw --percent from a seeded generator, so a command
// making the same calls gets the same answers run after run.
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

  // faultctl run syscall --syscall SYSCALL --errno ERR --percent 50 [FLAGS] --json
  // -- fl_probe trace ACTION..., to completion; the trace of the action `label`.
  SeededRun traced(const std::vector<std::string>& fault, const std::vector<std::string>& flags,
                   const std::vector<std::string>& action, const std::string& label) {
    std::vector<std::string> argv = {kFaultctl, "run", "syscall"};
    argv.insert(argv.end(), fault.begin(), fault.end());
    argv.insert(argv.end(), {"--percent", "50", "--duration", "60s", "--json"});
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", kProbe, "trace"});
    argv.insert(argv.end(), action.begin(), action.end());
    CommandResult o = run(argv, 60s);
    SeededRun r;
    r.ok = o.status.is(0);
    r.log = o.describe();
    std::istringstream lines(o.out);
    const std::string prefix = "TRACE " + label + " ";
    for (std::string l; std::getline(lines, l);) {
      if (l.rfind(prefix, 0) == 0) r.trace = l.substr(prefix.size());
      if (l.empty() || l.front() != '{') continue;
      auto j = nlohmann::json::parse(l, nullptr, false);
      if (!j.is_discarded() && j.value("event", "") == "started") r.started = j;
    }
    return r;
  }
  // 200 opens of one file under EIO at 50%: the seccomp rung.
  SeededRun opens(const std::vector<std::string>& flags) {
    return traced({"--syscall", "openat", "--errno", "EIO"}, flags, {"open", file_, "200"}, "open " + file_);
  }
  // 200 TCP socket() calls under EMFILE at 50%: the cgroup rung.
  SeededRun sockets(const std::vector<std::string>& flags) {
    return traced({"--syscall", "socket", "--errno", "EMFILE"}, flags, {"socket", "tcp", "200"}, "socket tcp");
  }

  static size_t failures(const std::string& trace, const std::string& err) {
    size_t n = 0;
    for (size_t p = trace.find(err); p != std::string::npos; p = trace.find(err, p + 1)) ++n;
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
  EXPECT_GE(failures(a.trace, "EIO"), 65u) << a.trace;
  EXPECT_LE(failures(a.trace, "EIO"), 135u) << a.trace;
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
  EXPECT_NE(text.out.find(", seed " + seed), std::string::npos) << "the dry-run plan names the seed\n"
                                                                << text.describe();
}

TEST_F(SyscallSeedTest, CgroupRungSameSeedGivesTheSameErrnoSequence) {
  SeededRun a = sockets({"--seed", "42"}), b = sockets({"--seed", "42"}), c = sockets({"--seed", "43"});
  ASSERT_TRUE(a.ok && b.ok && c.ok) << a.log << b.log << c.log;
  EXPECT_EQ(a.started.value("mechanism", ""), "cgroup") << a.log;
  EXPECT_EQ(a.started.value("seed", ""), "42") << a.log;
  ASSERT_FALSE(a.trace.empty()) << a.log;
  EXPECT_EQ(a.trace, b.trace) << "two runs of 200 socket() calls at 50% under --seed 42, drawn in the kernel";
  EXPECT_NE(a.trace, c.trace) << "another seed, other answers";
  EXPECT_GE(failures(a.trace, "EMFILE"), 65u) << a.trace;
  EXPECT_LE(failures(a.trace, "EMFILE"), 135u) << a.trace;
  // A drawn seed on the cgroup rung is printed and replays too.
  SeededRun drawn = sockets({});
  ASSERT_TRUE(drawn.ok) << drawn.log;
  EXPECT_EQ(drawn.started.value("seed_source", ""), "drawn") << drawn.log;
  SeededRun replay = sockets({"--seed", drawn.started.value("seed", "")});
  EXPECT_EQ(replay.trace, drawn.trace) << drawn.log << replay.log;
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
