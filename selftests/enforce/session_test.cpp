// Syscall faults and guards are held by their faultctl process, and registered
// so that the operator can see and end them: faultctl status lists them, abort
// sN ends a fault (a wrapped command runs on without it), abort --all (the kill
// switch) ends every syscall fault but no guard, abort gN releases a guard, and
// a killed owner's record is dropped.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "enforce_env.h"

namespace flenf {
namespace {

// The base fixture gives each test a private state folder and bpffs root, so
// abort --all here reaches only what this test started.
class SessionTest : public EnforceTest {
 protected:
  void TearDown() override {
    if (!state_dir_.empty()) {
      EXPECT_TRUE(records().empty()) << "session records left behind";
    }
    EnforceTest::TearDown();
  }
  // The record files in the state folder.
  std::vector<std::string> records() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(state_dir_ + "/run/sessions", ec)) {
      if (e.path().extension() == ".json") out.push_back(e.path().filename());
    }
    return out;
  }
  nlohmann::json status() const {
    CommandResult s = run({kFaultctl, "status", "--json"});
    EXPECT_TRUE(s.status.is(0)) << s.describe();
    auto j = nlohmann::json::parse(s.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << s.describe();
    return j;
  }
};

TEST_F(SessionTest, AbortEndsASeccompFaultAndTheCommandRunsOn) {
  const std::string file = state_dir_ + "/f.txt";
  std::ofstream(file) << "x\n";
  ChildProcess f =
      spawn({kFaultctl, "run",  "syscall", "--syscall", "openat", "--errno", "EIO",  "--duration", "60s", "--json",
             "--",      kProbe, "open",    file,        "5",      "wait",    "open", file,         "5",   "hold"},
            {.stdin_pipe = true});
  ASSERT_TRUE(f.wait_for("WAITING", 30s)) << f.describe();
  auto st = status();
  ASSERT_EQ(st["syscall_faults"].size(), 1u) << st.dump();
  const auto& s = st["syscall_faults"][0];
  EXPECT_EQ(s["mechanism"], "seccomp") << st.dump();
  EXPECT_EQ(s["owner_pid"], f.pid()) << st.dump();
  EXPECT_NE(s["summary"].get<std::string>().find("EIO on openat"), std::string::npos) << st.dump();
  const std::string id = s["id"];

  CommandResult a = run({kFaultctl, "abort", id});
  EXPECT_TRUE(a.status.is(0)) << a.describe();
  EXPECT_NE(a.out.find("fault " + id + " ended"), std::string::npos) << a.describe();
  EXPECT_TRUE(status()["syscall_faults"].empty()) << "an aborted fault is still listed";

  f.write_stdin("\n");
  ASSERT_TRUE(f.wait_for("HOLD", 30s)) << f.describe();
  f.close_stdin();
  auto e = f.wait(30s);
  ASSERT_TRUE(e && e->is(0)) << "the command's exit code passes through\n" << f.describe();
  auto p = phases(f.out());
  ASSERT_EQ(p.size(), 2u) << f.describe();
  EXPECT_EQ(show(p[0]["open " + file]), "EIO:5") << f.describe();
  EXPECT_EQ(show(p[1]["open " + file]), "ok:5") << "the fault outlived its abort\n" << f.describe();
  EXPECT_NE(f.out().find("\"event\":\"fault_ended\""), std::string::npos) << f.describe();
}

// The kill switch reaches a fault on a cgroup at once (the kernel policy is
// disarmed before the owner hears of it); the owner then exits 1, as an
// aborted packet fault does.
TEST_F(SessionTest, KillSwitchEndsACgroupFault) {
  TcpServer server;
  const std::string port = std::to_string(server.port());
  TestCgroup cg(unique_name("sesscg"));
  ChildProcess f = spawn({kFaultctl, "run", "syscall", "--syscall", "connect", "--errno", "ETIMEDOUT", "--duration",
                          "60s", "--cgroup", cg.relative()});
  ASSERT_TRUE(f.wait_for("syscall fault s", 20s, Stream::kEither)) << f.describe();
  const std::vector<std::string> probe = {kProbe, "connect", "tcp", "127.0.0.1", port, "3"};
  CommandResult before = run(probe, 20s, {.cgroup = cg.path()});
  EXPECT_EQ(show(results(before.out)["tcp 127.0.0.1:" + port]), "ETIMEDOUT:3") << before.describe() << f.describe();
  auto st = status();
  ASSERT_EQ(st["syscall_faults"].size(), 1u) << st.dump();
  EXPECT_EQ(st["syscall_faults"][0]["mechanism"], "cgroup");
  EXPECT_EQ(st["syscall_faults"][0]["counters"]["failed"], 3) << "per-fault counters from the kernel\n" << st.dump();

  CommandResult a = run({kFaultctl, "abort", "--all"});
  EXPECT_TRUE(a.status.is(0)) << a.describe();
  EXPECT_NE(a.out.find("fault s"), std::string::npos) << a.describe();
  CommandResult after = run(probe, 20s, {.cgroup = cg.path()});
  EXPECT_EQ(show(results(after.out)["tcp 127.0.0.1:" + port]), "ok:3") << after.describe();
  auto e = f.wait(10s);
  ASSERT_TRUE(e && e->is(1)) << f.describe();
  EXPECT_NE(f.describe().find("ended (aborted: ended from outside (faultctl abort))"), std::string::npos)
      << f.describe();
}

// A guard is enforcement, not a fault: the kill switch leaves it on; only
// abort gN releases it, and the command runs on.
TEST_F(SessionTest, GuardIsReleasedByNameOnly) {
  TcpServer server;
  const std::string port = std::to_string(server.port());
  ChildProcess g =
      spawn({kFaultctl, "guard",     "--enforce", "--deny",  "127.0.0.0/8", "--",        kProbe, "connect",
             "tcp",     "127.0.0.1", port,        "2",       "wait",        "connect",   "tcp",  "127.0.0.1",
             port,      "2",         "wait",      "connect", "tcp",         "127.0.0.1", port,   "2"},
            {.stdin_pipe = true});
  ASSERT_TRUE(wait_lines(g, "WAITING\n", 1)) << g.describe();
  auto st = status();
  ASSERT_EQ(st["guards"].size(), 1u) << st.dump();
  const std::string id = st["guards"][0]["id"];
  EXPECT_EQ(id[0], 'g');
  EXPECT_EQ(st["guards"][0]["counters"]["denied"], 2) << st.dump();

  CommandResult all = run({kFaultctl, "abort", "--all"});
  EXPECT_TRUE(all.status.is(0)) << all.describe();
  g.write_stdin("\n");
  ASSERT_TRUE(wait_lines(g, "WAITING\n", 2)) << g.describe();
  EXPECT_EQ(status()["guards"].size(), 1u) << "abort --all released a guard";

  CommandResult a = run({kFaultctl, "abort", id});
  EXPECT_TRUE(a.status.is(0)) << a.describe();
  EXPECT_NE(a.out.find("guard " + id + " released"), std::string::npos) << a.describe();
  g.write_stdin("\n");
  auto e = g.wait(30s);
  ASSERT_TRUE(e && e->is(0)) << g.describe();
  auto p = phases(g.out());
  ASSERT_EQ(p.size(), 3u) << g.describe();
  const std::string label = "tcp 127.0.0.1:" + port;
  EXPECT_EQ(show(p[0][label]), "EPERM:2") << g.describe();
  EXPECT_EQ(show(p[1][label]), "EPERM:2") << "the kill switch lifted enforcement\n" << g.describe();
  EXPECT_EQ(show(p[2][label]), "ok:2") << g.describe();
  EXPECT_NE(g.err().find("released by faultctl abort"), std::string::npos) << g.describe();
  EXPECT_TRUE(status()["guards"].empty());
}

// A guard fails closed: killed, its pinned hooks keep enforcing on the cgroup,
// status shows it orphaned, abort gN releases it, and once the command is gone
// the next faultctl removes the record, the pins and the cgroup.
TEST_F(SessionTest, KilledGuardKeepsEnforcingUntilReleased) {
  TcpServer server;
  const std::string port = std::to_string(server.port());
  ChildProcess g =
      spawn({kFaultctl, "guard",     "--enforce", "--deny",  "127.0.0.0/8", "--",        kProbe, "connect",
             "tcp",     "127.0.0.1", port,        "2",       "wait",        "connect",   "tcp",  "127.0.0.1",
             port,      "2",         "wait",      "connect", "tcp",         "127.0.0.1", port,   "2"},
            {.stdin_pipe = true});
  ASSERT_TRUE(wait_lines(g, "WAITING\n", 1)) << g.describe();
  const std::string cgroup = cgroup2_mount() + "/faultline-guard-" + std::to_string(g.pid());
  ::kill(g.pid(), SIGKILL);
  // Orphaned once the killed guard is gone, not merely signalled: until it is
  // reaped its pid still answers, so a loaded machine may show it alive a while.
  auto st = status();
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       st["guards"].size() == 1 && st["guards"][0]["orphaned"] != true && std::chrono::steady_clock::now() < deadline;
       st = status())
    std::this_thread::sleep_for(50ms);
  ASSERT_EQ(st["guards"].size(), 1u) << st.dump();
  EXPECT_EQ(st["guards"][0]["orphaned"], true) << st.dump();
  const std::string id = st["guards"][0]["id"];
  EXPECT_TRUE(std::filesystem::exists(bpffs_root_ + "/guards/" + id)) << "no pins";

  g.write_stdin("\n");
  ASSERT_TRUE(wait_lines(g, "WAITING\n", 2)) << g.describe();
  CommandResult a = run({kFaultctl, "abort", id});
  EXPECT_TRUE(a.status.is(0)) << a.describe();
  EXPECT_NE(a.out.find("guard " + id + " released (its faultctl was gone)"), std::string::npos) << a.describe();
  EXPECT_FALSE(std::filesystem::exists(bpffs_root_ + "/guards/" + id)) << "abort left the pins";
  g.write_stdin("\n");
  ASSERT_TRUE(wait_lines(g, "RESULT ", 3)) << g.describe();
  auto p = phases(g.out());
  ASSERT_EQ(p.size(), 3u) << g.describe();
  const std::string label = "tcp 127.0.0.1:" + port;
  EXPECT_EQ(show(p[0][label]), "EPERM:2") << g.describe();
  EXPECT_EQ(show(p[1][label]), "EPERM:2") << "a killed guard failed open\n" << g.describe();
  EXPECT_EQ(show(p[2][label]), "ok:2") << g.describe();

  // The probe exits after its last batch; the released record goes with its cgroup.
  for (int i = 0; i < 100 && std::filesystem::exists(cgroup); ++i) {
    EXPECT_TRUE(status()["guards"].empty()) << "a released guard is listed";
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(std::filesystem::exists(cgroup)) << "the sweep left the guard's cgroup";
  EXPECT_TRUE(records().empty());
}

// A killed guard whose command then ends: the next faultctl takes the pins,
// the cgroup and the record away, with nobody releasing anything.
TEST_F(SessionTest, KilledGuardIsSweptWhenItsCommandEnds) {
  ChildProcess g =
      spawn({kFaultctl, "guard", "--enforce", "--default-deny", "--", kProbe, "wait"}, {.stdin_pipe = true});
  ASSERT_TRUE(wait_lines(g, "WAITING\n", 1)) << g.describe();
  const std::string cgroup = cgroup2_mount() + "/faultline-guard-" + std::to_string(g.pid());
  ::kill(g.pid(), SIGKILL);
  ASSERT_EQ(status()["guards"].size(), 1u);
  g.close_stdin();  // the probe reads EOF and exits
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = status()["guards"].empty();
    if (!gone) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(gone) << "an orphaned guard with an empty cgroup is still listed";
  EXPECT_FALSE(std::filesystem::exists(cgroup));
  EXPECT_FALSE(std::filesystem::exists(bpffs_root_ + "/guards"));
  EXPECT_TRUE(records().empty());
}

// kill -9 of the owner takes its unpinned programs with it; the next faultctl
// drops the record, and abort of it says it had already ended.
TEST_F(SessionTest, KilledOwnerLeavesNoFaultBehind) {
  TestCgroup cg(unique_name("sesskill"));
  ChildProcess f = spawn({kFaultctl, "run", "syscall", "--syscall", "socket", "--errno", "EMFILE", "--duration", "60s",
                          "--cgroup", cg.relative()});
  ASSERT_TRUE(f.wait_for("syscall fault s", 20s, Stream::kEither)) << f.describe();
  ASSERT_EQ(records().size(), 1u);
  ::kill(f.pid(), SIGKILL);
  (void)f.wait(10s);
  EXPECT_TRUE(status()["syscall_faults"].empty());
  EXPECT_TRUE(records().empty()) << "status kept the record of a dead owner";
  CommandResult probe = run({kProbe, "socket", "tcp", "2"}, 20s, {.cgroup = cg.path()});
  EXPECT_EQ(show(results(probe.out)["socket tcp"]), "ok:2") << probe.describe();
}

TEST_F(SessionTest, AbortOfAnUnknownSessionSaysSo) {
  CommandResult a = run({kFaultctl, "abort", "s999"});
  EXPECT_TRUE(a.status.is(2)) << a.describe();
  EXPECT_NE(a.err.find("no active fault s999"), std::string::npos) << a.describe();
  CommandResult g = run({kFaultctl, "abort", "g999"});
  EXPECT_TRUE(g.status.is(2)) << g.describe();
  EXPECT_NE(g.err.find("no active guard g999"), std::string::npos) << g.describe();
}

}  // namespace
}  // namespace flenf
