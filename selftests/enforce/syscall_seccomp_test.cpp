// faultctl run syscall through seccomp user notification (the fallback for any
// syscall of a wrapped command): openat, read and write fail with the errno at
// 100% and at a percent; the same calls from an unwrapped process pass.
#include <fcntl.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "enforce_env.h"

namespace flenf {
namespace {

class SeccompTest : public EnforceTest {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    file_ = "/tmp/" + unique_name("seccomp.txt");
    std::ofstream(file_) << "faultline\n";
  }
  void TearDown() override {
    if (!file_.empty()) ::unlink(file_.c_str());
    EnforceTest::TearDown();
  }
  std::string file_;
};

struct SeccompRun {
  Counts inside, outside;
  long injected = -1, passed = -1;  // from faultctl's JSON "ended" line
  std::string log;
};

// run syscall --json ... -- fl_probe ACTION hold; the same ACTION unwrapped while it holds.
SeccompRun seccomp_and_outside(const std::string& syscall, const std::string& err, const std::string& percent,
                               const std::vector<std::string>& action, const std::string& label) {
  std::vector<std::string> argv = {kFaultctl,   "run",   "syscall",    "--syscall", syscall,  "--errno", err,
                                   "--percent", percent, "--duration", "60s",       "--json", "--",      kProbe};
  argv.insert(argv.end(), action.begin(), action.end());
  argv.push_back("hold");
  ChildProcess f = spawn(argv, {.stdin_pipe = true});
  SeccompRun r;
  bool held = f.wait_for("HOLD", 60s);
  if (held) {
    std::vector<std::string> o = {kProbe};
    o.insert(o.end(), action.begin(), action.end());
    CommandResult out = run(o, 30s);
    EXPECT_TRUE(out.status.is(0)) << out.describe();
    r.outside = results(out.out)[label];
  }
  f.close_stdin();
  auto e = f.wait(30s);
  EXPECT_TRUE(held) << f.describe();
  EXPECT_TRUE(e && e->is(0)) << f.describe();
  r.inside = results(f.out())[label];
  r.log = f.describe();
  std::istringstream lines(f.out());
  for (std::string l; std::getline(lines, l);) {
    if (l.empty() || l.front() != '{') continue;
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (!j.is_discarded() && j.value("event", "") == "started") {
      EXPECT_EQ(j.value("mechanism", ""), "seccomp") << l;
    }
    if (!j.is_discarded() && j.value("event", "") == "ended") {
      r.injected = j.value("injected", -1L);
      r.passed = j.value("passed", -1L);
    }
  }
  return r;
}

TEST_F(SeccompTest, CatSeesEioOnOpenat) {
  CommandResult in = run({kFaultctl, "run", "syscall", "--syscall", "openat", "--errno", "EIO", "--percent", "100",
                          "--duration", "10s", "--", "cat", file_});
  EXPECT_TRUE(in.status.is(1)) << in.describe();
  // cat writes its message in pieces ("cat: ", the path, ": Input/output
  // error"), and faultctl's progress line shares the stream: it may fall
  // between any two of them.
  EXPECT_NE(in.err.find("cat: "), std::string::npos) << in.describe();
  EXPECT_NE(in.err.find(file_), std::string::npos) << in.describe();
  EXPECT_NE(in.err.find(": Input/output error"), std::string::npos) << in.describe();
  EXPECT_EQ(in.out.find("faultline"), std::string::npos) << in.describe();
  CommandResult out = run({"cat", file_});
  EXPECT_TRUE(out.status.is(0)) << out.describe();
  EXPECT_EQ(out.out, "faultline\n");
}

struct Syscall {
  std::string name, err, action;
  friend void PrintTo(const Syscall& v, std::ostream* os) { *os << v.name; }
};

class SeccompEach : public SeccompTest, public ::testing::WithParamInterface<Syscall> {};

TEST_P(SeccompEach, FailsEveryCallAtFullRate) {
  const Syscall& s = GetParam();
  const std::string path = s.action == "write" ? "/dev/null" : file_;
  auto r = seccomp_and_outside(s.name, s.err, "100", {s.action, path, "50"}, s.action + " " + path);
  EXPECT_EQ(show(r.inside), s.err + ":50") << r.log;
  EXPECT_EQ(show(r.outside), "ok:50");
  EXPECT_EQ(r.injected, 50) << "faultctl's count and the probe's differ\n" << r.log;
}

// Binomial with n = 1000: five standard deviations either way.
TEST_P(SeccompEach, FailsAboutThePercentOfCalls) {
  const Syscall& s = GetParam();
  const std::string path = s.action == "write" ? "/dev/null" : file_;
  constexpr double n = 1000, p = 0.3;
  const double sd = std::sqrt(n * p * (1 - p));
  auto r = seccomp_and_outside(s.name, s.err, "30", {s.action, path, "1000"}, s.action + " " + path);
  const long failed = count_of(r.inside, s.err);
  EXPECT_EQ(failed + count_of(r.inside, "ok"), 1000) << show(r.inside) << "\n" << r.log;
  EXPECT_GE(failed, n * p - 5 * sd) << show(r.inside);
  EXPECT_LE(failed, n * p + 5 * sd) << show(r.inside);
  EXPECT_EQ(r.injected, failed) << r.log;
  EXPECT_EQ(show(r.outside), "ok:1000");
}

INSTANTIATE_TEST_SUITE_P(Enforce, SeccompEach,
                         ::testing::Values(Syscall{"openat", "EIO", "open"}, Syscall{"read", "EIO", "read"},
                                           Syscall{"write", "ENOSPC", "write"}),
                         [](const ::testing::TestParamInfo<Syscall>& i) { return i.param.name; });

}  // namespace
}  // namespace flenf
