// One guarded run for every fault family: the same faultctl, the same flags and
// the same endings for a packet fault, a syscall fault and a host resource fault.
// A breached health guardrail ends each with exit 7; SIGHUP ends each with exit
// 1; a syscall fault around a command ends at the breach and waits for the
// command; a syscall fault keeps a record like the others.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "enforce_env.h"
#include "guardrail_env.h"

namespace flenf {
namespace {

// A port on 127.0.0.1 nobody listens on: the health probe is refused at once.
// (A fresh TCP listener is opened and closed to pick it.)
std::string closed_port() {
  TcpServer s;
  return std::to_string(s.port());
}

nlohmann::json status() {
  CommandResult s = run({kFaultctl, "status", "--json"});
  EXPECT_TRUE(s.status.is(0)) << s.describe();
  return nlohmann::json::parse(s.out, nullptr, false);
}

// Nothing of a family left: no packet fault, resource fault or syscall fault.
bool nothing_listed(const nlohmann::json& st) {
  for (const char* k : {"faults", "resource_faults", "syscall_faults"}) {
    if (st.contains(k) && !st[k].empty()) return false;
  }
  return true;
}

class GuardedRunTest : public EnforceTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    ns_.emplace(unique_name("grun"));
    peer_.emplace(unique_name("grunp"));
    veth_.emplace(*ns_, veth_end(41, 'a'), *peer_, veth_end(41, 'b'));
    cg_.emplace(unique_name("grun"));
  }
  void TearDown() override {
    cg_.reset();
    veth_.reset();
    peer_.reset();
    ns_.reset();
    EnforceTest::TearDown();
  }

  // faultctl run for the family under test, 30 s long, with extra flags.
  std::vector<std::string> run_argv(const std::vector<std::string>& extra) const {
    std::vector<std::string> argv = {kFaultctl, "run"};
    const std::string& family = GetParam();
    if (family == "packet") {
      argv.insert(argv.end(), {"loss", "--netns", ns_->name(), "--target", veth_addr(41, 'b'), "--percent", "10"});
    } else if (family == "syscall") {
      argv.insert(argv.end(),
                  {"syscall", "--syscall", "connect", "--errno", "ECONNREFUSED", "--cgroup", cg_->relative()});
    } else {
      argv.insert(argv.end(), {"cpu", "--cores", "1", "--load", "10"});
    }
    argv.insert(argv.end(), {"--duration", "30s", "--json"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  std::optional<Netns> ns_, peer_;
  std::optional<VethPair> veth_;
  std::optional<TestCgroup> cg_;
};

TEST_P(GuardedRunTest, BreachedHealthGuardrailEndsTheFaultWithExit7) {
  // The packet fault's probe connects from the fault's namespace, where lo is up
  // and nothing listens either.
  const std::string url = "http://127.0.0.1:" + closed_port() + "/health";
  CommandResult r = run(run_argv({"--health-url", url, "--interval", "200ms"}), 60s);
  EXPECT_TRUE(r.status.is(7)) << r.describe();
  auto ended = json_event(r.out, "ended");
  ASSERT_TRUE(ended) << r.describe();
  EXPECT_EQ((*ended)["reason"], "guardrail") << ended->dump();
  EXPECT_EQ((*ended)["exit_code"], 7) << ended->dump();
  EXPECT_NE(ended->value("detail", "").find("health check: "), std::string::npos) << ended->dump();
  auto probe = json_event(r.out, "probe");
  ASSERT_TRUE(probe) << "every reading is a JSON line\n" << r.describe();
  EXPECT_EQ((*probe)["healthy"], false) << probe->dump();
}

TEST_P(GuardedRunTest, SighupEndsTheFaultWithExit1) {
  ChildProcess f = spawn(run_argv({}));
  ASSERT_TRUE(f.wait_for("\"started\"", 30s)) << f.describe();
  ASSERT_EQ(::kill(f.pid(), SIGHUP), 0);
  auto e = f.wait(30s);
  ASSERT_TRUE(e && e->is(1)) << f.describe();
  auto ended = json_event(f.out(), "ended");
  ASSERT_TRUE(ended) << f.describe();
  EXPECT_EQ((*ended)["reason"], "interrupted") << ended->dump();
  EXPECT_EQ((*ended)["detail"], "by SIGHUP") << ended->dump();
  auto st = status();
  EXPECT_TRUE(nothing_listed(st)) << "the fault must be gone once the run ended\n" << st.dump(2);
}

INSTANTIATE_TEST_SUITE_P(Family, GuardedRunTest, ::testing::Values("packet", "syscall", "resource"),
                         [](const auto& info) { return info.param; });

class GuardedSyscallRunTest : public EnforceTest {};

// A syscall fault around a command: the breach ends the fault at once (a
// `fault_ended` line), the command runs to its end, and the run exits 7.
TEST_F(GuardedSyscallRunTest, SyscallFaultAroundACommandEndsAtTheBreachAndWaitsForIt) {
  const std::string url = "http://127.0.0.1:" + closed_port() + "/";
  CommandResult r = run({kFaultctl, "run", "syscall", "--syscall", "connect", "--errno", "ECONNREFUSED", "--duration",
                         "30s", "--health-url", url, "--interval", "200ms", "--json", "--", "sleep", "2"},
                        60s);
  EXPECT_TRUE(r.status.is(7)) << r.describe();
  auto early = json_event(r.out, "fault_ended");
  ASSERT_TRUE(early) << r.describe();
  EXPECT_EQ((*early)["reason"], "guardrail") << early->dump();
  auto ended = json_event(r.out, "ended");
  ASSERT_TRUE(ended) << r.describe();
  EXPECT_EQ((*ended)["exit_code"], 7) << ended->dump();
}

// --record, --hypothesis and the kernel-signal guardrail on a syscall fault:
// the same record as a packet or host fault keeps, with a verdict.
TEST_F(GuardedSyscallRunTest, SyscallFaultKeepsARecord) {
  TestCgroup cg(unique_name("grunr"));
  const std::string dir = state_dir_ + "/record";
  CommandResult r = run({kFaultctl,
                         "run",
                         "syscall",
                         "--syscall",
                         "connect",
                         "--errno",
                         "ECONNREFUSED",
                         "--duration",
                         "2s",
                         "--cgroup",
                         cg.relative(),
                         "--kernel-signal",
                         "tcp_retransmits",
                         "--abort-above",
                         "100000",
                         "--hypothesis",
                         "connect errors do not make the host retransmit",
                         "--steady-state",
                         "1s",
                         "--record",
                         dir,
                         "--json"},
                        60s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  ASSERT_TRUE(std::filesystem::exists(dir + "/hypothesis.json")) << r.describe();
  std::ifstream v(dir + "/verdict.json");
  auto verdict = nlohmann::json::parse(v, nullptr, false);
  ASSERT_TRUE(verdict.is_object()) << r.describe();
  EXPECT_EQ(verdict["verdict"], "held") << verdict.dump(2);
  EXPECT_EQ(verdict["outcome"], "completed") << verdict.dump(2);
  CommandResult report = run({kFaultctl, "report", dir});
  EXPECT_TRUE(report.status.is(0)) << report.describe();
}

}  // namespace
}  // namespace flenf

namespace flenf {
namespace {

class RedactionTest : public EnforceTest {};

// Secrets in the flags never reach the record, the JSON lines or the command
// line kept in the record; --no-redact keeps them, and says so in the record.
TEST_F(RedactionTest, RecordsAndJsonLinesAreRedacted) {
  TcpServer health(false, true);
  TestCgroup cg(unique_name("grunx"));
  const std::string url = "http://127.0.0.1:" + std::to_string(health.port()) + "/h?token=S3CR3T-T0KEN";
  for (bool keep : {false, true}) {
    SCOPED_TRACE(keep ? "--no-redact" : "default");
    const std::string dir = state_dir_ + (keep ? "/kept" : "/redacted");
    std::vector<std::string> argv = {kFaultctl,
                                     "run",
                                     "syscall",
                                     "--syscall",
                                     "connect",
                                     "--errno",
                                     "EIO",
                                     "--duration",
                                     "1s",
                                     "--cgroup",
                                     cg.relative(),
                                     "--health-url",
                                     url,
                                     "--interval",
                                     "500ms",
                                     "--hypothesis",
                                     "API_KEY=hunter2 stays out",
                                     "--steady-state",
                                     "1s",
                                     "--record",
                                     dir,
                                     "--json"};
    if (keep) argv.push_back("--no-redact");
    CommandResult r = run(argv, 60s);
    ASSERT_TRUE(r.status.is(0)) << r.describe();
    std::ifstream h(dir + "/hypothesis.json");
    std::string text((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(text.empty()) << r.describe();
    auto j = nlohmann::json::parse(text);
    if (keep) {
      EXPECT_NE(text.find("S3CR3T-T0KEN"), std::string::npos) << text;
      EXPECT_EQ(j["redaction"]["enabled"], false) << text;
    } else {
      EXPECT_EQ(text.find("S3CR3T-T0KEN"), std::string::npos) << text;
      EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
      EXPECT_EQ(r.out.find("S3CR3T-T0KEN"), std::string::npos) << r.out;
      EXPECT_EQ(j["redaction"]["enabled"], true) << text;
    }
  }
}

}  // namespace
}  // namespace flenf

namespace flenf {
namespace {

// The kill switches outside the CLI. FAULTLINE_KILL_FILE points at a file of
// the test's own, so no other run on the machine is touched.
class KillSwitchTest : public GuardedRunTest {
 protected:
  void SetUp() override {
    GuardedRunTest::SetUp();
    if (IsSkipped()) return;
    kill_file_ = state_dir_ + "/kill";
    ::setenv("FAULTLINE_KILL_FILE", kill_file_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("FAULTLINE_KILL_FILE");
    ::unsetenv("FAULTLINE_DISABLED");
    GuardedRunTest::TearDown();
  }
  void touch_kill_file() const { std::ofstream(kill_file_) << "stop\n"; }
  std::string kill_file_;
};

// The kill file ends a running fault of each family within a second, and no
// new one starts while it exists (exit 2, nothing applied).
TEST_P(KillSwitchTest, KillFileEndsTheFaultWithinASecondAndRefusesNewOnes) {
  ChildProcess f = spawn(run_argv({}));
  ASSERT_TRUE(f.wait_for("\"started\"", 30s)) << f.describe();
  const auto t0 = std::chrono::steady_clock::now();
  touch_kill_file();
  auto e = f.wait(10s);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(e && e->is(1)) << f.describe();
  EXPECT_LT(ms, 1000) << "the run must end within a second of the kill file";
  std::fprintf(stderr, "kill file -> %s run ended in %lld ms\n", GetParam().c_str(), static_cast<long long>(ms));
  auto ended = json_event(f.out(), "ended");
  ASSERT_TRUE(ended) << f.describe();
  EXPECT_EQ((*ended)["reason"], "aborted") << ended->dump();
  EXPECT_NE(ended->value("detail", "").find("kill file"), std::string::npos) << ended->dump();
  EXPECT_TRUE(nothing_listed(status())) << status().dump(2);

  CommandResult again = run(run_argv({}), 30s);
  EXPECT_TRUE(again.status.is(2)) << again.describe();
  EXPECT_NE(again.err.find("kill file " + kill_file_ + " exists"), std::string::npos) << again.describe();
  EXPECT_TRUE(nothing_listed(status())) << status().dump(2);
}

TEST_P(KillSwitchTest, FaultlineDisabledRefusesEveryRun) {
  ::setenv("FAULTLINE_DISABLED", "1", 1);
  CommandResult r = run(run_argv({}), 30s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("FAULTLINE_DISABLED=1 is set"), std::string::npos) << r.describe();
  EXPECT_TRUE(nothing_listed(status())) << status().dump(2);
}

INSTANTIATE_TEST_SUITE_P(Family, KillSwitchTest, ::testing::Values("packet", "syscall", "resource"),
                         [](const auto& info) { return info.param; });

class KillFileTest : public EnforceTest {};

// Traffic recovers within a second of the kill file: connects from a cgroup
// under a 100% ECONNREFUSED fault go through again.
TEST_F(KillFileTest, TrafficRecoversWithinASecondOfTheKillFile) {
  const std::string kill = state_dir_ + "/kill";
  ::setenv("FAULTLINE_KILL_FILE", kill.c_str(), 1);
  TcpServer server;
  const std::string port = std::to_string(server.port());
  TestCgroup cg(unique_name("grunk"));
  ChildProcess f = spawn({kFaultctl, "run", "syscall", "--syscall", "connect", "--errno", "ECONNREFUSED", "--duration",
                          "60s", "--cgroup", cg.relative(), "--json"});
  ASSERT_TRUE(f.wait_for("\"started\"", 30s)) << f.describe();
  const std::vector<std::string> probe = {kProbe, "connect", "tcp", "127.0.0.1", port, "1"};
  CommandResult before = run(probe, 20s, {.cgroup = cg.path()});
  EXPECT_EQ(show(results(before.out)["tcp 127.0.0.1:" + port]), "ECONNREFUSED:1") << before.describe();
  const auto t0 = std::chrono::steady_clock::now();
  std::ofstream(kill) << "stop\n";
  long long ms = -1;
  for (int i = 0; i < 100; ++i) {
    CommandResult o = run(probe, 20s, {.cgroup = cg.path()});
    if (show(results(o.out)["tcp 127.0.0.1:" + port]) == "ok:1") {
      ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      break;
    }
  }
  ::unsetenv("FAULTLINE_KILL_FILE");
  ASSERT_GE(ms, 0) << "connects never recovered\n" << f.describe();
  EXPECT_LT(ms, 1000) << "traffic must recover within a second of the kill file";
  std::fprintf(stderr, "kill file -> traffic recovered in %lld ms\n", ms);
  auto e = f.wait(10s);
  EXPECT_TRUE(e && e->is(1)) << f.describe();
}

}  // namespace
}  // namespace flenf

namespace flenf {
namespace {

// A host fault whose faultctl was killed is still reached by the kill file: its
// detached reaper watches it too and reverts the fault.
TEST_F(KillFileTest, KillFileReachesAResourceFaultWhoseFaultctlIsGone) {
  const std::string kill = state_dir_ + "/kill";
  ::setenv("FAULTLINE_KILL_FILE", kill.c_str(), 1);
  ChildProcess f = spawn({kFaultctl, "run", "cpu", "--cores", "1", "--load", "10", "--duration", "60s", "--json"});
  ASSERT_TRUE(f.wait_for("\"started\"", 30s)) << f.describe();
  ASSERT_EQ(::kill(f.pid(), SIGKILL), 0);
  (void)f.wait(10s);
  ASSERT_FALSE(nothing_listed(status())) << "the fault outlives its faultctl until its reaper acts";
  const auto t0 = std::chrono::steady_clock::now();
  std::ofstream(kill) << "stop\n";
  long long ms = -1;
  for (int i = 0; i < 60; ++i) {
    if (nothing_listed(status())) {
      ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  ::unsetenv("FAULTLINE_KILL_FILE");
  ASSERT_GE(ms, 0) << status().dump(2);
  EXPECT_LT(ms, 1000) << "the reaper must revert within a second of the kill file";
  std::fprintf(stderr, "kill file -> orphaned resource fault reverted in %lld ms\n", ms);
}

}  // namespace
}  // namespace flenf
