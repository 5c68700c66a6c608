// The brakes of faultctl run syscall (--after, --max-injections, --start-after)
// on each mechanism this kernel loads: the cgroup socket hooks (counters in the
// policy map, bumped atomically by the programs) and seccomp user notification
// (counters in faultctl). A probe makes K calls and counts the errnos it got.
// The BPF LSM rung shares the kernel helper with the cgroup hooks; it cannot
// load here (KERNEL.md) and is not exercised.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "enforce_env.h"
#include "guardrail_env.h"

namespace flenf {
namespace {

struct BrakedRun {
  std::map<std::string, Counts> results;
  nlohmann::json started, ended;
  std::string log;
};

// faultctl run syscall FLAGS --duration 60s --json -- fl_probe ACTIONS, to completion.
BrakedRun run_braked(const std::vector<std::string>& flags, const std::vector<std::string>& actions,
                     const std::string& duration = "60s") {
  std::vector<std::string> argv = {kFaultctl, "run", "syscall"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--duration", duration, "--json", "--", kProbe});
  argv.insert(argv.end(), actions.begin(), actions.end());
  CommandResult o = run(argv, 60s);
  EXPECT_TRUE(o.status.is(0)) << o.describe();
  BrakedRun r;
  r.results = results(o.out);
  r.log = o.describe();
  r.started = json_event(o.out, "started").value_or(nlohmann::json::object());
  r.ended = json_event(o.out, "ended").value_or(nlohmann::json::object());
  return r;
}

class SyscallBrakesTest : public EnforceTest {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    for (auto* f : {&file_, &late_file_}) {
      *f = "/tmp/" + unique_name(f == &file_ ? "brakes.txt" : "brakes-late.txt");
      std::ofstream(*f) << "faultline\n";
    }
  }
  void TearDown() override {
    for (auto* f : {&file_, &late_file_}) {
      if (!f->empty()) ::unlink(f->c_str());
    }
    EnforceTest::TearDown();
  }
  std::string file_, late_file_;
};

// 20 connects: 5 pass (--after), the next 7 fail (the cap), the last 8 pass.
TEST_F(SyscallBrakesTest, CgroupConnectAfterFiveCappedAtSeven) {
  TcpServer server;
  const std::string port = std::to_string(server.port());
  BrakedRun r = run_braked({"--syscall", "connect", "--errno", "ECONNREFUSED", "--after", "5", "--max-injections", "7"},
                           {"connect", "tcp", "127.0.0.1", port, "20"});
  EXPECT_EQ(r.started.value("mechanism", ""), "cgroup") << r.log;
  EXPECT_EQ(show(r.results["tcp 127.0.0.1:" + port]), "ECONNREFUSED:7 ok:13") << r.log;
  EXPECT_EQ(r.ended["injected"], 7) << r.ended.dump();
  EXPECT_EQ(r.ended["cap"]["reached"], true) << r.ended.dump();
  EXPECT_EQ(r.ended["cap"]["spared"], 8) << "the 8 calls after the cap drew a failure and were let through: "
                                         << r.ended.dump();
  EXPECT_TRUE(r.ended["cap"].contains("reached_at")) << r.ended.dump();
}

// Another shell's `faultctl status` sees the cap reached while the fault is on,
// for the kernel rung (read from the policy map) and for seccomp (the owner's counters).
TEST_F(SyscallBrakesTest, StatusShowsTheCapReachedWhileTheFaultIsOn) {
  TcpServer server;
  const std::string port = std::to_string(server.port());
  struct Case {
    std::vector<std::string> flags, actions;
  };
  for (const Case& c :
       {Case{{"--syscall", "connect", "--errno", "ECONNREFUSED", "--max-injections", "7"},
             {"connect", "tcp", "127.0.0.1", port, "15"}},
        Case{{"--syscall", "openat", "--errno", "EIO", "--max-injections", "7"}, {"open", file_, "15"}}}) {
    SCOPED_TRACE(c.flags[1]);
    std::vector<std::string> argv = {kFaultctl, "run", "syscall"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    argv.insert(argv.end(), {"--duration", "60s", "--", kProbe});
    argv.insert(argv.end(), c.actions.begin(), c.actions.end());
    argv.push_back("hold");
    ChildProcess f = ChildProcess::spawn(argv, {.stdin_pipe = true});
    ASSERT_TRUE(f.wait_for("HOLD", 30s)) << f.describe();
    // seccomp counters are refreshed by the owner once a second.
    nlohmann::json fault;
    for (int i = 0; i < 30; ++i) {
      CommandResult st = run({kFaultctl, "status", "--json"}, 30s);
      auto j = nlohmann::json::parse(st.out, nullptr, false);
      if (!j.is_discarded() && j["syscall_faults"].size() == 1) fault = j["syscall_faults"][0];
      if (fault.is_object() && fault["counters"].value("cap_spared", 0) == 8) break;
      ::usleep(100'000);
    }
    EXPECT_EQ(fault["counters"]["cap"], 7) << fault.dump();
    EXPECT_EQ(fault["counters"]["failed"], 7) << fault.dump();
    EXPECT_EQ(fault["counters"]["cap_spared"], 8) << fault.dump();
    EXPECT_NE(fault.value("summary", "").find("at most 7 calls"), std::string::npos) << fault.dump();
    CommandResult table = run({kFaultctl, "status"}, 30s);
    EXPECT_NE(table.out.find("cap reached: 7 injections (8 spared)"), std::string::npos) << table.describe();
    f.close_stdin();
    auto e = f.wait(30s);
    EXPECT_TRUE(e && e->is(0)) << f.describe();
  }
}

// socket(): only the cap, no --after: the first 3 fail, then all pass.
TEST_F(SyscallBrakesTest, CgroupSocketCappedAtThree) {
  BrakedRun r = run_braked({"--syscall", "socket", "--errno", "EMFILE", "--max-injections", "3"},
                           {"socket", "tcp", "10", "socket", "udp", "4"});
  EXPECT_EQ(show(r.results["socket tcp"]), "EMFILE:3 ok:7") << r.log;
  EXPECT_EQ(show(r.results["socket udp"]), "ok:4") << r.log;
}

// Calls made before --start-after pass; those after it fail.
TEST_F(SyscallBrakesTest, CgroupSocketStartsAfterTheDelay) {
  BrakedRun r = run_braked({"--syscall", "socket", "--errno", "EMFILE", "--start-after", "2s"},
                           {"socket", "tcp", "3", "sleep", "3000", "socket", "udp", "4"});
  EXPECT_EQ(show(r.results["socket tcp"]), "ok:3") << "before the start\n" << r.log;
  EXPECT_EQ(show(r.results["socket udp"]), "EMFILE:4") << "after the start\n" << r.log;
}

// seccomp: 10 opens, --after 3, cap 4: ok, ok, ok, EIO x4, ok x3.
TEST_F(SyscallBrakesTest, SeccompOpenAfterThreeCappedAtFour) {
  BrakedRun r = run_braked({"--syscall", "openat", "--errno", "EIO", "--after", "3", "--max-injections", "4"},
                           {"open", file_, "10"});
  EXPECT_EQ(r.started.value("mechanism", ""), "seccomp") << r.log;
  EXPECT_EQ(show(r.results["open " + file_]), "EIO:4 ok:6") << r.log;
  EXPECT_EQ(r.ended["injected"], 4) << r.ended.dump();
  EXPECT_EQ(r.ended["cap"]["reached"], true) << r.ended.dump();
  EXPECT_EQ(r.ended["cap"]["spared"], 3) << r.ended.dump();
}

// seccomp, --after alone at 100%: exactly the first N pass.
TEST_F(SyscallBrakesTest, SeccompOpenAfterSevenFailsTheRest) {
  BrakedRun r = run_braked({"--syscall", "openat", "--errno", "EACCES", "--after", "7"}, {"open", file_, "12"});
  EXPECT_EQ(show(r.results["open " + file_]), "EACCES:5 ok:7") << r.log;
}

TEST_F(SyscallBrakesTest, SeccompOpenStartsAfterTheDelay) {
  BrakedRun r = run_braked({"--syscall", "openat", "--errno", "EIO", "--start-after", "2s"},
                           {"open", file_, "3", "sleep", "3000", "open", late_file_, "4"});
  EXPECT_EQ(show(r.results["open " + file_]), "ok:3") << "before the start\n" << r.log;
  EXPECT_EQ(show(r.results["open " + late_file_]), "EIO:4") << "after the start\n" << r.log;
}

TEST_F(SyscallBrakesTest, BadBrakesAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> flags;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--max-injections", "0"}, "--max-injections 0: expected a whole number from 1 to 1000000000"},
      {{"--max-injections=-3"}, "--max-injections '-3': expected a whole number"},
      {{"--max-injections", "ten"}, "--max-injections 'ten': expected a whole number"},
      {{"--max-injections", "99999999999999999999999"}, "--max-injections 99999999999999999999999: too large"},
      {{"--after", "0"}, "--after 0: expected a whole number from 1"},
      {{"--after", "1.5"}, "--after '1.5': expected a whole number"},
      {{"--start-after", "0s"}, "--start-after must be above 0"},
      {{"--start-after", "soon"}, "--start-after"},
      {{"--start-after", "10s"}, "--start-after 10s is not shorter than --duration 10s"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {kFaultctl, "run",    "syscall",    "--syscall", "socket",
                                     "--errno", "EMFILE", "--duration", "10s"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    argv.insert(argv.end(), {"--", kProbe, "socket", "tcp", "1"});
    CommandResult o = run(argv, 30s);
    EXPECT_TRUE(o.status.is(2)) << o.describe();
    EXPECT_NE(o.err.find(c.needle), std::string::npos) << "wanted '" << c.needle << "'\n" << o.describe();
    EXPECT_EQ(o.out.find("RESULT"), std::string::npos) << "nothing may run on bad input\n" << o.describe();
  }
  // Packet faults take --max-injections and --start-after, but not --after.
  CommandResult pkt = run({kFaultctl, "run", "loss", "--target", "192.0.2.1", "--percent", "100", "--after", "3",
                           "--duration", "10s", "--dry-run"},
                          30s);
  EXPECT_TRUE(pkt.status.is(2)) << pkt.describe();
  EXPECT_NE(pkt.err.find("after"), std::string::npos) << pkt.describe();
  CommandResult cap0 = run({kFaultctl, "run", "loss", "--target", "192.0.2.1", "--percent", "100", "--max-injections",
                            "0", "--duration", "10s", "--dry-run"},
                           30s);
  EXPECT_TRUE(cap0.status.is(2)) << cap0.describe();
  EXPECT_NE(cap0.err.find("--max-injections 0"), std::string::npos) << cap0.describe();
  CommandResult big = run({kFaultctl, "run", "loss", "--target", "192.0.2.1", "--percent", "100", "--max-injections",
                           "1000000001", "--duration", "10s", "--dry-run"},
                          30s);
  EXPECT_TRUE(big.status.is(2)) << big.describe();
  EXPECT_NE(big.err.find("--max-injections 1000000001: too large"), std::string::npos) << big.describe();
  // Resource faults have no injections to count.
  CommandResult cpu = run({kFaultctl, "run", "cpu", "--cores", "1", "--load", "10", "--max-injections", "3",
                           "--duration", "10s", "--dry-run"},
                          30s);
  EXPECT_TRUE(cpu.status.is(2)) << cpu.describe();
  EXPECT_NE(cpu.err.find("max-injections"), std::string::npos) << cpu.describe();
}

TEST_F(SyscallBrakesTest, DryRunAndPlanCarryTheBrakes) {
  CommandResult o =
      run({kFaultctl, "run",       "syscall",          "--syscall", "socket",        "--errno", "EMFILE",
           "--after", "4",         "--max-injections", "9",         "--start-after", "3s",      "--duration",
           "10s",     "--dry-run", "--json",           "--",        kProbe,          "socket",  "tcp",
           "1"},
          30s);
  EXPECT_TRUE(o.status.is(0)) << o.describe();
  EXPECT_NE(o.out.find("\"after\":4"), std::string::npos) << o.describe();
  EXPECT_NE(o.out.find("\"max_injections\":9"), std::string::npos) << o.describe();
  EXPECT_NE(o.out.find("\"start_after\":\"3s\""), std::string::npos) << o.describe();
  EXPECT_EQ(o.out.find("RESULT"), std::string::npos) << "a dry run runs nothing\n" << o.describe();
}

}  // namespace
}  // namespace flenf
