// faultctl guard --block-dangerous end to end: the real faultctl (as nobody
// when the test is root, and as root with a kernel rule, where the command
// runs in the guard's cgroup) wrapping real bash, whose every exec is judged.
// Enforcing, `rm -rf` fails with EPERM and the tree stays; monitoring, it is
// reported and runs. The activity log keeps each flagged exec, and verifies.
// Held for approval at a terminal (a real pseudo-terminal), the question is
// answered there, or withdrawn when the queue decides first.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/tls/tls_harness.h"

namespace {

using fltest::ChildProcess;
using fltest::CommandResult;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kExecFaultctl = FAULTCTL_PATH;

class GuardExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    fs::create_directories(dir_.file("victim/sub"));
    fltest::write_file(dir_.file("victim/sub/file"), "keep me\n");
    for (const auto& p : {dir_.file("victim"), dir_.file("victim/sub")}) ASSERT_EQ(::chmod(p.c_str(), 0777), 0);
    fltest::write_file(dir_.file("script.sh"),
                       "rm -rf " + dir_.file("victim") + "\necho \"after $?\"\nls " + dir_.path() + " >/dev/null\n");
    ASSERT_EQ(::chmod(dir_.file("script.sh").c_str(), 0755), 0);
    env_ = fltest::guard_env(dir_.path(), {"FAULTLINE_STATE_DIR=" + dir_.file("state")});
  }

  // faultctl guard FLAGS --json-log ACTIVITY -- bash script.sh, as nobody
  // when we are root (the request guard alone), or as root.
  CommandResult guard(std::vector<std::string> flags, bool as_root = false) {
    std::vector<std::string> argv = {kExecFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "bash", dir_.file("script.sh")});
    if (!as_root) argv = fltest::as_nobody(std::move(argv));
    return fltest::run_command(argv, {.env = env_}, 60s);
  }

  // The same, started and left running (--approve-dangerous waits for a person).
  ChildProcess guard_child(std::vector<std::string> flags) {
    std::vector<std::string> argv = {kExecFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "bash", dir_.file("script.sh")});
    argv = fltest::as_nobody(std::move(argv));
    return ChildProcess::spawn(argv, {.env = env_});
  }
  // faultctl approvals ..., as the guard's user.
  CommandResult approvals(std::vector<std::string> args) {
    std::vector<std::string> argv = {kExecFaultctl, "approvals"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv = fltest::as_nobody(std::move(argv));
    return fltest::run_command(argv, {.env = env_}, 30s);
  }
  // The id of the held exec ("held for approval 123.1").
  static std::optional<std::string> held_id(ChildProcess& g) {
    // The whole line: it ends with the deny command.
    if (!g.wait_for(" | deny ", 20s, fltest::Stream::kStderr)) return std::nullopt;
    std::smatch m;
    const std::string err = g.err();
    if (!std::regex_search(err, m, std::regex("held for approval ([0-9]+\\.[0-9]+)"))) return std::nullopt;
    return m[1].str();
  }

  std::string activity() const {
    std::ifstream in(dir_.file("activity.jsonl"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(GuardExecTest, EnforcingRefusesRmRfWithEpermAndKeepsTheTree) {
  CommandResult r = guard({"--enforce", "--block-dangerous"});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_TRUE(fs::exists(dir_.file("victim/sub/file"))) << "rm -rf ran under the gate";
  EXPECT_NE(r.out.find("after 126"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.err;
  // The words judged: the program the kernel runs (its path), then argv[1...].
  EXPECT_NE(r.err.find("faultline guard: exec: blocked '/usr/bin/rm -rf " + dir_.file("victim") +
                       "' (rm-recursive-force: rm -r -f: removes a tree without asking)"),
            std::string::npos)
      << r.err;
  // bash, rm and ls at least (execvp tries each PATH folder: each try is judged).
  EXPECT_NE(r.err.find(" judged, 1 flagged, 0 held, 1 blocked (--block-dangerous)"), std::string::npos) << r.err;
  const std::string act = activity();
  EXPECT_NE(act.find("\"kind\":\"exec\""), std::string::npos) << act;
  EXPECT_NE(act.find("\"rule\":\"rm-recursive-force\""), std::string::npos) << act;
  CommandResult v = fltest::run_command({kExecFaultctl, "activity", "verify", dir_.file("activity.jsonl")});
  EXPECT_TRUE(v.status.is(0)) << v.describe();
}

TEST_F(GuardExecTest, MonitorReportsItAndItRuns) {
  CommandResult r = guard({"--block-dangerous"});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_FALSE(fs::exists(dir_.file("victim")));
  EXPECT_NE(r.out.find("after 0"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("faultline guard: exec: would block (monitor: it ran) '/usr/bin/rm -rf"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(" judged, 1 flagged, 0 held, 0 blocked (--block-dangerous)"), std::string::npos) << r.err;
}

TEST_F(GuardExecTest, WithoutTheFlagNothingIsJudged) {
  CommandResult r = guard({"--enforce"});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_FALSE(fs::exists(dir_.file("victim")));
  EXPECT_EQ(r.err.find("execs:"), std::string::npos) << r.err;
}

TEST_F(GuardExecTest, AsRootTheCommandInTheGuardsCgroupIsJudgedToo) {
  if (::geteuid() != 0) GTEST_SKIP() << "NEEDS ROOT: the guard's cgroup and its kernel rule";
  // A kernel rule only (no request flag): the root guard without its proxy.
  CommandResult r = guard({"--enforce", "--block-dangerous", "--deny", "192.0.2.1/32"}, true);
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_TRUE(fs::exists(dir_.file("victim/sub/file")));
  EXPECT_NE(r.err.find("faultline guard: exec: blocked '/usr/bin/rm -rf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" judged, 1 flagged, 0 held, 1 blocked (--block-dangerous)"), std::string::npos) << r.err;
}

TEST_F(GuardExecTest, ADangerousCommandAtTheTopNeverStarts) {
  std::vector<std::string> argv = {kExecFaultctl, "guard",     "--enforce", "--block-dangerous",
                                   "--",          "/bin/bash", "-c",        "rm -rf " + dir_.file("victim")};
  argv = fltest::as_nobody(std::move(argv));
  CommandResult r = fltest::run_command(argv, {.env = env_}, 60s);
  EXPECT_FALSE(r.status.is(0)) << r.describe();
  EXPECT_TRUE(fs::exists(dir_.file("victim/sub/file")));
  EXPECT_NE(r.err.find("blocked 'rm -rf"), std::string::npos) << r.err;
}

TEST_F(GuardExecTest, AHeldExecRunsOnceApproved) {
  ChildProcess g = guard_child({"--enforce", "--approve-dangerous"});
  auto id = held_id(g);
  ASSERT_TRUE(id) << g.describe();
  EXPECT_TRUE(fs::exists(dir_.file("victim/sub/file"))) << "it ran before it was approved";
  auto list = approvals({"list"});
  EXPECT_NE(list.out.find(*id), std::string::npos) << list.describe();
  EXPECT_NE(list.out.find("rm -rf " + dir_.file("victim")), std::string::npos) << list.out;
  auto ok = approvals({"approve", *id});
  ASSERT_TRUE(ok.status.is(0)) << ok.describe();
  CommandResult end = g.finish(30s);
  EXPECT_TRUE(end.status.is(0)) << end.describe();
  EXPECT_FALSE(fs::exists(dir_.file("victim")));
  EXPECT_NE(end.out.find("after 0"), std::string::npos) << end.describe();
  EXPECT_NE(end.err.find("faultline guard: exec: approved, it runs: '/usr/bin/rm -rf"), std::string::npos) << end.err;
  EXPECT_NE(end.err.find(" 1 flagged, 1 held, 0 blocked"), std::string::npos) << end.err;
  const std::string act = activity();
  EXPECT_NE(act.find("\"verdict\":\"approve\""), std::string::npos) << act;
  EXPECT_NE(act.find("\"verdict\":\"allow\""), std::string::npos) << act;
}

TEST_F(GuardExecTest, AHeldExecDeniedOrUndecidedFailsWithEperm) {
  {
    ChildProcess g = guard_child({"--enforce", "--approve-dangerous"});
    auto id = held_id(g);
    ASSERT_TRUE(id) << g.describe();
    ASSERT_TRUE(approvals({"deny", *id, "--reason", "not on a Friday"}).status.is(0));
    CommandResult end = g.finish(30s);
    EXPECT_TRUE(end.status.is(0)) << end.describe();
    EXPECT_NE(end.out.find("after 126"), std::string::npos) << end.describe();
    EXPECT_NE(end.err.find("denied, refused: '/usr/bin/rm -rf"), std::string::npos) << end.err;
    EXPECT_NE(end.err.find("(not on a Friday)"), std::string::npos) << end.err;
  }
  EXPECT_TRUE(fs::exists(dir_.file("victim/sub/file")));
  ChildProcess g = guard_child({"--enforce", "--approve-dangerous", "--approve-timeout", "1s"});
  CommandResult end = g.finish(30s);
  EXPECT_TRUE(end.status.is(0)) << end.describe();
  EXPECT_NE(end.err.find("not decided in time, refused: '/usr/bin/rm -rf"), std::string::npos) << end.err;
  EXPECT_TRUE(fs::exists(dir_.file("victim/sub/file")));
  EXPECT_NE(end.err.find(" 1 held, 1 blocked"), std::string::npos) << end.err;
}

// faultctl guard on a pseudo-terminal of its own (its controlling terminal,
// its stdin, stdout and stderr): what a person at a terminal sees and types.
class OnTerminal {
 public:
  OnTerminal(std::vector<std::string> argv, const std::vector<std::string>& env) {
    argv = fltest::as_nobody(std::move(argv));
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    std::vector<std::string> env_copy = env;
    for (auto& e : env_copy) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      // The terminal is root's: the guard runs as nobody.
      if (::geteuid() == 0) (void)!::fchown(STDIN_FILENO, 65534, 65534);
      ::execvpe(args[0], args.data(), envp.data());
      ::_exit(127);
    }
  }
  ~OnTerminal() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  bool started() const { return pid_ > 0; }
  // Reads what the terminal shows until `needle` appears after `from` (or 30 s).
  bool shows(const std::string& needle, size_t from = 0) {
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (seen_.find(needle, from) == std::string::npos) {
      if (std::chrono::steady_clock::now() > until) return false;
      if (!read_some(100)) return false;
    }
    return true;
  }
  void type(const std::string& s) { ASSERT_EQ(::write(master_, s.data(), s.size()), ssize_t(s.size())); }
  // The exit status once it ends (reading the terminal meanwhile), -1 after 60 s.
  int finish() {
    const auto until = std::chrono::steady_clock::now() + 60s;
    int st = 0;
    while (std::chrono::steady_clock::now() < until) {
      (void)read_some(50);
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        while (read_some(50)) {
        }
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
    }
    return -1;
  }
  const std::string& seen() const { return seen_; }

 private:
  // False once the terminal has nothing more to give (EOF, EIO when all is closed).
  bool read_some(int ms) {
    pollfd p{master_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return pid_ > 0;
    char buf[4096];
    const ssize_t n = ::read(master_, buf, sizeof buf);
    if (n <= 0) return false;
    seen_.append(buf, size_t(n));
    return true;
  }
  pid_t pid_ = -1;
  int master_ = -1;
  std::string seen_;
};

TEST_F(GuardExecTest, AtATerminalTheHeldExecIsAskedAndRunsOnce) {
  OnTerminal t({kExecFaultctl, "guard", "--enforce", "--approve-dangerous", "--", "bash", dir_.file("script.sh")},
               env_);
  ASSERT_TRUE(t.started());
  ASSERT_TRUE(t.shows("[a]lways (this command line, this session), [d]eny: ")) << t.seen();
  EXPECT_NE(t.seen().find("faultline guard: run '/usr/bin/rm -rf " + dir_.file("victim")), std::string::npos)
      << t.seen();
  EXPECT_TRUE(fs::exists(dir_.file("victim/sub/file"))) << "it ran before it was answered";
  t.type("o\n");
  EXPECT_EQ(t.finish(), 0) << t.seen();
  EXPECT_FALSE(fs::exists(dir_.file("victim")));
  EXPECT_NE(t.seen().find("after 0"), std::string::npos) << t.seen();
  EXPECT_NE(t.seen().find("approved, it runs: '/usr/bin/rm -rf " + dir_.file("victim")), std::string::npos) << t.seen();
  EXPECT_NE(t.seen().find("(at the terminal)"), std::string::npos) << t.seen();
}

TEST_F(GuardExecTest, AlwaysLetsTheSameCommandLineRunUntilRevoked) {
  const std::string v = dir_.file("victim");
  fltest::write_file(dir_.file("again.sh"), "rm -rf " + v + "\necho \"first $?\"\nmkdir -p " + v + "/sub\nrm -rf " + v +
                                                "\necho \"second $?\"\nmkdir -p " + v + "/sub\ntouch " +
                                                dir_.file("ready") + "\nwhile [ ! -e " + dir_.file("go") +
                                                " ]; do sleep 0.05; done\nrm -rf " + v + "\necho \"third $?\"\n");
  OnTerminal t({kExecFaultctl, "guard", "--enforce", "--approve-dangerous", "--", "bash", dir_.file("again.sh")}, env_);
  ASSERT_TRUE(t.started());
  ASSERT_TRUE(t.shows("[d]eny: ")) << t.seen();
  t.type("always\n");
  ASSERT_TRUE(t.shows("second 0")) << t.seen();
  EXPECT_NE(t.seen().find("first 0"), std::string::npos) << t.seen();
  // Asked once: the second run of the same line went ahead on the grant.
  EXPECT_NE(t.seen().find("always allowed ("), std::string::npos) << t.seen();
  const size_t asked_once = t.seen().find("[d]eny: ");
  EXPECT_EQ(t.seen().find("[d]eny: ", asked_once + 1), std::string::npos) << t.seen();
  for (int i = 0; i < 600 && !fs::exists(dir_.file("ready")); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(fs::exists(dir_.file("ready"))) << t.seen();

  auto list = approvals({"list"});
  EXPECT_TRUE(list.status.is(0)) << list.describe();
  EXPECT_NE(list.out.find("always allowed: /usr/bin/rm -rf " + v + "  rule rm-recursive-force"), std::string::npos)
      << list.describe();
  auto bad = approvals({"revoke", "1.2"});
  EXPECT_TRUE(bad.status.is(2)) << bad.describe();
  EXPECT_NE(bad.err.find("a grant's ID is PID.gN"), std::string::npos) << bad.describe();
  auto revoked = approvals({"revoke", "all"});
  EXPECT_TRUE(revoked.status.is(0)) << revoked.describe();
  EXPECT_NE(revoked.out.find("revoked 1 grant (1 guard holding execs)"), std::string::npos) << revoked.describe();

  const size_t before = t.seen().size();
  fltest::write_file(dir_.file("go"), "");
  ASSERT_TRUE(t.shows("[d]eny: ", before)) << "not asked again after the revoke: " << t.seen();
  t.type("d\n");
  EXPECT_EQ(t.finish(), 0) << t.seen();
  EXPECT_NE(t.seen().find("third 126"), std::string::npos) << t.seen();
  EXPECT_TRUE(fs::exists(v + "/sub"));
}

TEST_F(GuardExecTest, ADecisionElsewhereWithdrawsTheTerminalsQuestion) {
  OnTerminal t({kExecFaultctl, "guard", "--enforce", "--approve-dangerous", "--", "bash", dir_.file("script.sh")},
               env_);
  ASSERT_TRUE(t.started());
  ASSERT_TRUE(t.shows("[d]eny: ")) << t.seen();
  std::smatch m;
  const std::string seen = t.seen();
  ASSERT_TRUE(std::regex_search(seen, m, std::regex("held for approval ([0-9]+\\.[0-9]+)"))) << seen;
  auto ok = approvals({"approve", m[1].str()});
  ASSERT_TRUE(ok.status.is(0)) << ok.describe();
  ASSERT_TRUE(t.shows("(approved elsewhere, it runs)")) << t.seen();
  EXPECT_EQ(t.finish(), 0) << t.seen();
  EXPECT_NE(t.seen().find("after 0"), std::string::npos) << t.seen();
  EXPECT_FALSE(fs::exists(dir_.file("victim")));
}

TEST_F(GuardExecTest, ApprovePromptTtyWithoutATerminalRefusesToStart) {
  std::vector<std::string> argv = {kExecFaultctl,      "guard", "--enforce", "--approve-dangerous",
                                   "--approve-prompt", "tty",   "--",        "true"};
  // setsid -w: no controlling terminal, whatever the test runner has.
  argv.insert(argv.begin(), {"setsid", "-w"});
  argv = fltest::as_nobody(std::move(argv));
  CommandResult r = fltest::run_command(argv, {.env = env_}, 60s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--approve-prompt tty: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no terminal to ask on"), std::string::npos) << r.err;
}

TEST_F(GuardExecTest, BadCombinationsAreNamed) {
  CommandResult r = fltest::run_command({kExecFaultctl, "guard", "--block-dangerous", "--gateway", "--gateway-token",
                                         "agent=abcdefghijkl", "--addr", "127.0.0.1:0"},
                                        {.env = env_}, 30s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--block-dangerous judges the command's execs: --gateway runs no command"), std::string::npos)
      << r.err;
}

}  // namespace
