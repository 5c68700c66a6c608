// faultctl guard and run syscall where cgroup2 and bpffs are not mounted where
// the host has them: under `ip netns exec` (its own mount namespace, /sys
// remounted for the netns), in `unshare -m` with /sys/fs/cgroup unmounted (a
// container's view), and with a new pid namespace too; and guard --netns.
// Each run is judged by what the command saw: a denied connect refused, an
// allowed one reaching a listener that exists only in the test's netns.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "enforce_env.h"

namespace flenf {
namespace {

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A TCP listener on every address of a namespace's lo (fl_probe tcpsink).
class NetnsSink {
 public:
  NetnsSink(const Netns& ns, int port)
      : child_(ChildProcess::spawn({kProbe, "--netns", ns.name(), "tcpsink", std::to_string(port)})) {
    ready_ = child_.wait_for("LISTENING", 10s);
  }
  [[nodiscard]] bool ready() const { return ready_; }
  [[nodiscard]] std::string describe() { return child_.describe(); }

 private:
  ChildProcess child_;
  bool ready_ = false;
};

class NamespaceViewTest : public EnforceTest {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    ns_.emplace(unique_name("view"));
    port_ = 20000 + static_cast<int>(::getpid() % 20000);
    sink_.emplace(*ns_, port_);
    ASSERT_TRUE(sink_->ready()) << sink_->describe();
    // Without a guard both destinations are reached: the test can tell a deny.
    CommandResult plain = run({kProbe, "--netns", ns_->name(), "connect", "tcp", "127.0.0.1", port(), "1", "connect",
                               "tcp", "127.0.0.2", port(), "1"});
    auto r = results(plain.out);
    ASSERT_EQ(show(r["tcp " + allowed()]), "ok:1") << plain.describe();
    ASSERT_EQ(show(r["tcp " + denied()]), "ok:1") << plain.describe();
  }
  void TearDown() override {
    sink_.reset();
    ns_.reset();
    EnforceTest::TearDown();
  }
  [[nodiscard]] std::string port() const { return std::to_string(port_); }
  [[nodiscard]] std::string allowed() const { return "127.0.0.1:" + port(); }
  [[nodiscard]] std::string denied() const { return "127.0.0.2:" + port(); }
  // The guard flags and the probe the tests run under it (in whatever netns it is started in).
  [[nodiscard]] std::vector<std::string> guard_args() const {
    return {"guard", "--enforce", "--deny", denied() + "/tcp", "--deny-errno", "ECONNREFUSED", "--"};
  }
  // With in_netns, the probe enters the test's namespace itself.
  [[nodiscard]] std::vector<std::string> probe(bool in_netns = false) const {
    std::vector<std::string> p = {kProbe};
    if (in_netns) p.insert(p.end(), {"--netns", ns_->name()});
    return cat(p, {"connect", "tcp", "127.0.0.1", port(), "2", "connect", "tcp", "127.0.0.2", port(), "2", "hold"});
  }
  // Runs argv (a guard whose command is probe()); while the probe holds, `during`
  // looks around (given the pid argv started as); then checks what the probe
  // saw and the guard's exit.
  void expect_enforced(const std::vector<std::string>& argv, const std::function<void(pid_t)>& during = {}) {
    ChildProcess g = ChildProcess::spawn(argv, {.stdin_pipe = true});
    const bool held = g.wait_for("HOLD", 30s);
    if (held && during) during(g.pid());
    g.close_stdin();
    auto e = g.wait(30s);
    ASSERT_TRUE(held) << "the guarded probe never held: " << g.describe();
    EXPECT_TRUE(e && e->is(0)) << g.describe();
    auto r = results(g.out());
    EXPECT_EQ(show(r["tcp " + allowed()]), "ok:2") << "the allowed connect reaches the sink in the netns\n"
                                                   << g.describe();
    EXPECT_EQ(show(r["tcp " + denied()]), "ECONNREFUSED:2") << "the denied connect is refused\n" << g.describe();
    EXPECT_NE(g.err().find("connect " + denied() + "/tcp -> deny"), std::string::npos) << g.describe();
    EXPECT_EQ(g.err().find("no cgroup"), std::string::npos) << g.describe();
    // argv execs its way to faultctl, so the guard's cgroup carries this pid
    // (the fixture knows only cgroups of argv[0] == faultctl).
    struct stat st {};
    EXPECT_NE(::stat((cgroup2_mount() + "/faultline-guard-" + std::to_string(g.pid())).c_str(), &st), 0)
        << "the guard left its cgroup behind";
  }
  // The guard pin folders under the test's bpffs root, as we see them or, with
  // a pid, as that process's mount namespace does.
  [[nodiscard]] std::vector<std::string> guard_pins(pid_t in = 0) const {
    std::vector<std::string> out;
    std::error_code ec;
    const std::string root = in ? "/proc/" + std::to_string(in) + "/root" + bpffs_root_ : bpffs_root_;
    for (const auto& d : std::filesystem::directory_iterator(root + "/guards", ec)) out.push_back(d.path().filename());
    return out;
  }

  std::optional<Netns> ns_;
  std::optional<NetnsSink> sink_;
  int port_ = 0;
};

// `ip netns exec NS sh -c CMD` and its stdout: what a command there sees.
std::string in_ip_netns_exec(const Netns& ns, const std::string& cmd) {
  return run({"ip", "netns", "exec", ns.name(), "sh", "-c", cmd}).out;
}

TEST_F(NamespaceViewTest, GuardUnderIpNetnsExec) {
  // What the issue is about: ip netns exec hides both mounts.
  ASSERT_EQ(in_ip_netns_exec(*ns_, "grep -c ' - cgroup2 ' /proc/self/mountinfo"), "0\n");
  ASSERT_EQ(in_ip_netns_exec(*ns_, "grep -c ' - bpf ' /proc/self/mountinfo"), "0\n");
  std::vector<std::string> pins_there, pins_here;
  expect_enforced(cat(cat({"ip", "netns", "exec", ns_->name(), kFaultctl}, guard_args()), probe()), [&](pid_t pid) {
    pins_there = guard_pins(pid);
    pins_here = guard_pins();
  });
  // The pins went to a bpffs the guard mounted in its own mount namespace (the
  // command's too, which keeps it alive): not ours to see.
  EXPECT_EQ(pins_there.size(), 1u) << "a pin folder under " << bpffs_root_ << "/guards in the guard's view";
  EXPECT_TRUE(pins_here.empty()) << "pins in the host's bpffs";
  EXPECT_EQ(in_ip_netns_exec(*ns_, "grep -c ' - bpf ' /proc/self/mountinfo"), "0\n")
      << "the bpffs mount reached another ip netns exec";
}

// Killed under `ip netns exec`, the guard fails closed: its pins are in the
// bpffs of its mount namespace, which the command keeps alive. The host's
// faultctl sees the record, abort gN disarms the policy, and once the command
// is gone the next faultctl removes the record and the cgroup by its name.
TEST_F(NamespaceViewTest, KilledGuardUnderIpNetnsExecFailsClosed) {
  std::vector<std::string> batch = {"connect", "tcp", "127.0.0.1", port(), "1",
                                    "connect", "tcp", "127.0.0.2", port(), "1"};
  std::vector<std::string> argv = cat({"ip", "netns", "exec", ns_->name(), kFaultctl}, guard_args());
  argv.push_back(kProbe);
  for (int i = 0; i < 3; ++i) argv = cat(cat(argv, batch), {"wait"});
  ChildProcess g = ChildProcess::spawn(argv, {.stdin_pipe = true});
  ASSERT_TRUE(wait_lines(g, "WAITING\n", 1)) << g.describe();
  const std::string cgroup = cgroup2_mount() + "/faultline-guard-" + std::to_string(g.pid());
  // Whatever fails below, the probe and the cgroup the killed guard left go.
  struct CgroupSweep {
    const std::string& path;
    ~CgroupSweep() {
      struct stat sb {};
      if (::stat(path.c_str(), &sb) == 0) remove_cgroup(path);
    }
  } sweep{cgroup};
  ::kill(g.pid(), SIGKILL);
  // Reaped before the host looks: a killed process is someone's until then,
  // and the record of a guard whose owner still shows is not orphaned.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!g.poll_exit() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  CommandResult st = run({kFaultctl, "status", "--json"});
  auto j = nlohmann::json::parse(st.out, nullptr, false);
  ASSERT_TRUE(!j.is_discarded() && j["guards"].size() == 1u) << st.describe();
  const std::string id = j["guards"][0]["id"];
  EXPECT_EQ(j["guards"][0]["orphaned"], true) << "pins out of the host's view still count\n" << st.describe();

  g.write_stdin("\n");
  ASSERT_TRUE(wait_lines(g, "WAITING\n", 2)) << g.describe();
  CommandResult a = run({kFaultctl, "abort", id});
  EXPECT_TRUE(a.status.is(0)) << a.describe();
  g.write_stdin("\n");
  ASSERT_TRUE(wait_lines(g, "WAITING\n", 3)) << g.describe();
  auto p = phases(g.out());
  ASSERT_GE(p.size(), 3u) << g.describe();
  EXPECT_EQ(show(p[0]["tcp " + denied()]), "ECONNREFUSED:1") << g.describe();
  EXPECT_EQ(show(p[1]["tcp " + denied()]), "ECONNREFUSED:1") << "a killed guard failed open\n" << g.describe();
  EXPECT_EQ(show(p[1]["tcp " + allowed()]), "ok:1") << g.describe();
  EXPECT_EQ(show(p[2]["tcp " + denied()]), "ok:1") << "abort from the host did not disarm it\n" << g.describe();

  g.close_stdin();  // the probe reads EOF and exits; its cgroup empties
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    CommandResult s = run({kFaultctl, "status", "--json"});
    auto sj = nlohmann::json::parse(s.out, nullptr, false);
    struct stat sb {};
    gone = !sj.is_discarded() && sj["guards"].empty() && ::stat(cgroup.c_str(), &sb) != 0;
    if (!gone) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(gone) << "the record or " << cgroup << " outlived the command";
}

TEST_F(NamespaceViewTest, GuardNetnsFlag) {
  // The probe is started in our namespace; only --netns puts it where the sink is.
  std::vector<std::string> pins_seen;
  std::vector<std::string> argv = {kFaultctl, "guard", "--netns", ns_->name()};
  auto rest = guard_args();
  argv.insert(argv.end(), rest.begin() + 1, rest.end());
  expect_enforced(cat(argv, probe()), [&](pid_t) { pins_seen = guard_pins(); });
  EXPECT_EQ(pins_seen.size(), 1u) << "our own bpffs holds the pins";
  EXPECT_TRUE(guard_pins().empty()) << "pins left after the guard ended";
}

TEST_F(NamespaceViewTest, GuardNetnsByPathAndPid) {
  const std::string path = "/run/netns/" + ns_->name();
  std::vector<std::string> argv = {kFaultctl, "guard", "--netns", path};
  auto rest = guard_args();
  argv.insert(argv.end(), rest.begin() + 1, rest.end());
  expect_enforced(cat(argv, probe()));
  // pid:N: the namespace of a process that is in it (the sink's probe is not
  // ours to name, so a sleeper of our own).
  ChildProcess sleeper =
      ChildProcess::spawn({"ip", "netns", "exec", ns_->name(), kProbe, "hold"}, {.stdin_pipe = true});
  ASSERT_TRUE(sleeper.wait_for("HOLD", 10s)) << sleeper.describe();
  argv[3] = "pid:" + std::to_string(sleeper.pid());
  expect_enforced(cat(argv, probe()));
  sleeper.close_stdin();
  (void)sleeper.wait(10s);
}

TEST_F(NamespaceViewTest, SyscallFaultUnderIpNetnsExec) {
  ChildProcess f = ChildProcess::spawn({"ip",        "netns",   "exec",    ns_->name(),  kFaultctl,    "run", "syscall",
                                        "--syscall", "connect", "--errno", "ECONNRESET", "--duration", "30s", "--",
                                        kProbe,      "connect", "tcp",     "127.0.0.1",  port(),       "3"});
  auto e = f.wait(60s);
  EXPECT_TRUE(e && e->is(0)) << f.describe();
  EXPECT_EQ(show(results(f.out())["tcp " + allowed()]), "ECONNRESET:3") << f.describe();
  EXPECT_NE(f.err().find("cgroup socket hooks"), std::string::npos) << "the cgroup rung, not a fallback\n"
                                                                    << f.describe();
  struct stat st {};
  EXPECT_NE(::stat((cgroup2_mount() + "/faultline-syscall-" + std::to_string(f.pid())).c_str(), &st), 0)
      << "the fault left its command's cgroup behind";
}

// A mount namespace like a container's: /sys/fs/cgroup (and with it the cgroup2
// mount) unmounted; pid 1 is the host's init, whose view still has it.
TEST_F(NamespaceViewTest, GuardInMountNamespaceWithoutCgroupMount) {
  std::string cmd = "umount -l /sys/fs/cgroup && ! grep -q ' - cgroup2 ' /proc/self/mountinfo && exec";
  for (const auto& a : cat({kFaultctl}, guard_args())) cmd += " '" + a + "'";
  for (const auto& a : probe(true)) cmd += " '" + a + "'";
  std::vector<std::string> pins_seen;
  expect_enforced({"unshare", "-m", "sh", "-c", cmd}, [&](pid_t) { pins_seen = guard_pins(); });
  EXPECT_EQ(pins_seen.size(), 1u) << "/sys/fs/bpf was still mounted there: the pins are in the shared bpffs";
  EXPECT_TRUE(guard_pins().empty()) << "pins left after the guard ended";
  // And our own view was left alone.
  struct stat st {};
  EXPECT_EQ(::stat((cgroup2_mount() + "/cgroup.procs").c_str(), &st), 0);
}

// The same with a new pid namespace (faultctl is pid 1 there), so that nothing
// of the host's view is at hand.
TEST_F(NamespaceViewTest, GuardInPidAndMountNamespace) {
  std::string cmd = "umount -l /sys/fs/cgroup && ! grep -q ' - cgroup2 ' /proc/self/mountinfo && exec";
  for (const auto& a : cat({kFaultctl}, guard_args())) cmd += " '" + a + "'";
  for (const auto& a : probe(true)) cmd += " '" + a + "'";
  // faultctl is pid 1 there: its cgroup is faultline-guard-1 (the fixture's
  // leftover check knows faultctl pids of this process's view only).
  const std::string cg = cgroup2_mount() + "/faultline-guard-1";
  struct stat st {};
  ASSERT_NE(::stat(cg.c_str(), &st), 0) << cg << " exists already";
  bool cgroup_seen = false;
  expect_enforced({"unshare", "-m", "-p", "-f", "--mount-proc", "sh", "-c", cmd},
                  [&](pid_t) { cgroup_seen = ::stat(cg.c_str(), &st) == 0; });
  EXPECT_TRUE(cgroup_seen) << "the guard's cgroup is in the host's hierarchy: " << cg;
  EXPECT_NE(::stat(cg.c_str(), &st), 0) << "left behind: " << cg;
  EXPECT_TRUE(guard_pins().empty()) << "pins left after the guard ended";
}

TEST_F(NamespaceViewTest, PrivateCgroupMountIsReported) {
  CommandResult r = run({"unshare", "-m", "-p", "-f", "--mount-proc", "sh", "-c",
                         "umount -l /sys/fs/cgroup && exec '" + kFaultctl + "' features"});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("no cgroup2 mount in this mount namespace; a private one this process holds"), std::string::npos)
      << r.describe();
}

}  // namespace
}  // namespace flenf
