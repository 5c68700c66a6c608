// faultctl guard --watch-fs and --max-memory/--max-pids/--max-cpu end to end:
// the real faultctl wrapping real bash and python3. As a user (nobody when
// the test is root) the watch is inotify; as root it is fanotify and only the
// command's processes count (a write by the test itself meanwhile is not).
// The limits need root: a fork bomb stops at --max-pids, the limit files are
// written while the command runs and gone after it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <thread>

#include "base/cgroup.h"
#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/test_bpffs.h"
#include "selftests/tls/tls_harness.h"

namespace {

using fltest::ChildProcess;
using fltest::CommandResult;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kFsFaultctl = FAULTCTL_PATH;

class GuardFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    fs::create_directories(work());
    fs::create_directories(work() + "/src");
    fltest::write_file(work() + "/existing.txt", "first\n");
    fltest::write_file(work() + "/old.txt", "to go\n");
    for (const auto& p : {work(), work() + "/src", work() + "/existing.txt", work() + "/old.txt"})
      ASSERT_EQ(::chmod(p.c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path(), {"FAULTLINE_STATE_DIR=" + dir_.file("state")});
  }
  std::string work() const { return dir_.file("work"); }

  std::vector<std::string> argv(std::vector<std::string> flags, const std::string& script, bool as_root) {
    std::vector<std::string> a = {kFsFaultctl, "guard"};
    a.insert(a.end(), flags.begin(), flags.end());
    a.insert(a.end(), {"--", "/bin/bash", "-c", script});
    if (!as_root) a = fltest::as_nobody(std::move(a));
    return a;
  }

  // 1,200 bytes created, a line added, a file removed.
  std::string changes() const {
    return "cd " + work() + " && printf '%1200s' x > src/feature.go && echo more >> existing.txt && rm old.txt";
  }

  std::string activity() const {
    std::ifstream in(dir_.file("activity.jsonl"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  void expect_the_three_changes(const std::string& err) {
    EXPECT_NE(err.find("faultline guard: fs: create ./src/feature.go (1.2 KB)"), std::string::npos) << err;
    EXPECT_NE(err.find("faultline guard: fs: modify ./existing.txt (11 B)"), std::string::npos) << err;
    EXPECT_NE(err.find("faultline guard: fs: delete ./old.txt"), std::string::npos) << err;
    EXPECT_NE(err.find("faultline guard: fs: agent touched 3 file(s) - 1 created, 1 modified, 1 deleted"),
              std::string::npos)
        << err;
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(GuardFsTest, AsAUserEachChangeIsSaidAndKeptInTheActivityLog) {
  CommandResult r = fltest::run_command(
      argv({"--watch-fs", "--watch-path", work(), "--json-log", dir_.file("activity.jsonl")}, changes(), false),
      {.env = env_}, 60s);
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("with inotify"), std::string::npos) << r.err;
  expect_the_three_changes(r.err);
  const std::string act = activity();
  EXPECT_NE(act.find(R"("kind":"fs","method":"CREATE","host":"","path":"./src/feature.go")"), std::string::npos) << act;
  EXPECT_NE(act.find(R"("kind":"fs","method":"DELETE","host":"","path":"./old.txt")"), std::string::npos) << act;
  CommandResult v = fltest::run_command({kFsFaultctl, "activity", "verify", dir_.file("activity.jsonl")});
  EXPECT_TRUE(v.status.is(0)) << v.describe();
}

TEST_F(GuardFsTest, TheWorkingFolderIsTheDefault) {
  // A command that changes nothing: nothing said, the summary says so.
  std::vector<std::string> a = fltest::as_nobody(
      {"/bin/sh", "-c", "cd " + work() + " && exec " + kFsFaultctl + " guard --watch-fs -- cat existing.txt"});
  CommandResult r = fltest::run_command(a, {.env = env_}, 60s);
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("faultline guard: fs: watching " + fs::canonical(work()).string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fs: agent touched 0 file(s) - 0 created, 0 modified, 0 deleted"), std::string::npos) << r.err;
}

TEST_F(GuardFsTest, AsRootOnlyTheCommandsProcessesCount) {
  if (::geteuid() != 0) GTEST_SKIP() << "NEEDS ROOT: fanotify and the process connector";
  // The command changes its three files, then waits for ./outside.txt, which
  // the test writes: a change by another process, not counted.
  ChildProcess g = ChildProcess::spawn(argv({"--watch-fs", "--watch-path", work()},
                                            changes() + " && while [ ! -s outside.txt ]; do sleep 0.05; done", true),
                                       {.env = env_});
  ASSERT_TRUE(g.wait_for("fs: delete ./old.txt", 30s, fltest::Stream::kStderr)) << g.describe();
  fltest::write_file(work() + "/outside.txt", "not the command's\n");
  CommandResult r = g.finish(30s);
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("with fanotify (only the command's processes count)"), std::string::npos) << r.err;
  expect_the_three_changes(r.err);
  EXPECT_EQ(r.err.find("outside.txt"), std::string::npos) << r.err;
  // rm ran as a process of its own and was gone before long: still counted, by its pid.
  EXPECT_TRUE(std::regex_search(r.err, std::regex("fs: delete ./old.txt, pid [0-9]+"))) << r.err;
}

TEST_F(GuardFsTest, AForkBombStopsAtMaxPids) {
  if (::geteuid() != 0) GTEST_SKIP() << "NEEDS ROOT: the limits are written to the command's cgroup";
  // Forks until the kernel refuses, says how many it got, then ends them all.
  const std::string bomb =
      "import os, signal\n"
      "kids = []\n"
      "try:\n"
      "    for _ in range(200):\n"
      "        pid = os.fork()\n"
      "        if pid == 0:\n"
      "            signal.pause()\n"
      "            os._exit(0)\n"
      "        kids.append(pid)\n"
      "except OSError as e:\n"
      "    print('refused', e.errno)\n"
      "print('forked', len(kids))\n"
      "for k in kids: os.kill(k, signal.SIGKILL); os.waitpid(k, 0)\n";
  std::vector<std::string> a = {kFsFaultctl, "guard", "--max-pids", "20", "--", "/usr/bin/python3", "-c", bomb};
  CommandResult r = fltest::run_command(a, {.env = env_}, 60s);
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("refused 11"), std::string::npos) << r.describe();  // EAGAIN
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("forked ([0-9]+)"))) << r.describe();
  EXPECT_LT(std::stoi(m[1].str()), 20) << r.describe();
  EXPECT_GT(std::stoi(m[1].str()), 5) << r.describe();
  EXPECT_NE(r.err.find("faultline guard: limits: pids 20 ("), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("limits: pids: [0-9]+ forks refused"))) << r.err;
}

TEST_F(GuardFsTest, MemoryAndCpuLimitsAreWrittenAndTheirCgroupsRemoved) {
  if (::geteuid() != 0) GTEST_SKIP() << "NEEDS ROOT: the limits are written to the command's cgroup";
  ChildProcess g = ChildProcess::spawn({kFsFaultctl, "guard", "--max-memory", "64MiB", "--max-cpu", "50%", "--",
                                        "/bin/bash", "-c", "echo started; exec sleep 60"},
                                       {.env = env_, .stop_grace = 5000ms});
  // Running: the guard passes SIGTERM on from here, and cleans up after.
  ASSERT_TRUE(g.wait_for("started", 30s)) << g.describe();
  const std::string err = g.err();
  const size_t at = err.find("faultline guard: limits: ");
  ASSERT_NE(at, std::string::npos) << err;
  const std::optional<std::string> line = err.substr(at, err.find('\n', at) - at);
  // "memory 67108864 bytes (DIR/memory.max)" or "(DIR/memory.limit_in_bytes, cgroup v1)".
  std::smatch m;
  ASSERT_TRUE(std::regex_search(*line, m,
                                std::regex(R"(memory 67108864 bytes \(([^,)]+/(memory\.max|memory\.limit_in_bytes)))")))
      << *line;
  const std::string memory_file = m[1].str();
  std::ifstream in(memory_file);
  std::string value;
  in >> value;
  EXPECT_EQ(value, "67108864") << memory_file;
  ASSERT_TRUE(std::regex_search(*line, m, std::regex(R"(cpu 50% \(([^,)]+)/(cpu\.max|cpu\.cfs_quota_us))"))) << *line;
  const std::string cpu_dir = m[1].str();
  std::ifstream cpu(cpu_dir + "/" + m[2].str());
  std::string quota;
  cpu >> quota;
  EXPECT_EQ(quota, "50000") << cpu_dir;
  const std::string memory_dir = memory_file.substr(0, memory_file.rfind('/'));
  g.signal(SIGTERM);
  auto st = g.wait(30s);
  ASSERT_TRUE(st.has_value()) << g.describe();
  EXPECT_FALSE(fs::exists(memory_dir)) << memory_dir << " left behind";
  EXPECT_FALSE(fs::exists(cpu_dir)) << cpu_dir << " left behind";
}

TEST_F(GuardFsTest, BadFlagsAreRefusedByName) {
  struct Case {
    std::vector<std::string> flags;
    std::string said;
  };
  const Case cases[] = {
      {{"--watch-path", work()}, "--watch-path goes with --watch-fs"},
      {{"--watch-fs", "--watch-path", work() + "/nope"}, "--watch-path " + work() + "/nope: No such file"},
      {{"--watch-fs", "--watch-path", work() + "/existing.txt"}, "not a folder"},
      {{"--max-pids", "0"}, "--max-pids 0: a whole number"},
      {{"--max-cpu", "150"}, "--max-cpu 150: a share of one CPU"},
      {{"--max-memory", "lots"}, "--max-memory"},
  };
  for (const Case& c : cases) {
    CommandResult r = fltest::run_command(argv(c.flags, "true", true), {.env = env_}, 30s);
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.said), std::string::npos) << r.err;
  }
  // As a user the limits cannot be set: refused, nothing run.
  CommandResult r =
      fltest::run_command(argv({"--max-memory", "2G"}, "touch " + work() + "/ran", false), {.env = env_}, 30s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--max-memory sets a limit on the command's cgroup, which needs root"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(work() + "/ran"));
}

// --enforce-fs: the command's opens and execs judged by fanotify permission
// events on its own mount namespace. Paths are the resolved ones: a
// symbolic link to a denied file is denied.
class GuardFsGateTest : public GuardFsTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "NEEDS ROOT: a mount namespace and fanotify permission events";
    GuardFsTest::SetUp();
    fs::create_directories(work() + "/secret");
    fltest::write_file(work() + "/secret/key.txt", "the key\n");
    fs::create_symlink(work() + "/secret/key.txt", work() + "/link");
    // The killed guard's record and pins go to folders of the test's own.
    bpffs_ = "/sys/fs/bpf/fl-fsgate-" + std::to_string(::getpid());
    env_.push_back("FAULTLINE_RUN_DIR=" + dir_.file("run"));
    env_.push_back("FAULTLINE_BPFFS_ROOT=" + bpffs_);
  }
  void TearDown() override {
    if (!bpffs_.empty()) fltest::remove_test_bpffs_root(bpffs_);
  }
  CommandResult gate(std::vector<std::string> flags, const std::string& script) {
    return fltest::run_command(argv(std::move(flags), script, true), {.env = env_}, 60s);
  }
  std::string bpffs_;
};

TEST_F(GuardFsGateTest, EnforcingADeniedPathFailsWithEpermThroughASymlinkToo) {
  CommandResult r =
      gate({"--enforce", "--enforce-fs", "--fs-deny", "secret/", "--json-log", dir_.file("activity.jsonl")},
           "cd " + work() +
               " && cat link; echo \"link $?\"; cat secret/key.txt; echo \"direct $?\"; "
               "cat existing.txt");
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("link 1"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("direct 1"), std::string::npos) << r.describe();
  EXPECT_EQ(r.out.find("the key"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("first"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.err;
  const std::string real = fs::canonical(work()).string() + "/secret/key.txt";
  EXPECT_NE(r.err.find("faultline guard: fs: blocked open '" + real + "' (--fs-deny secret/), pid "), std::string::npos)
      << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("fs: [0-9]+ opens judged on [0-9]+ mounts, 2 refused"))) << r.err;
  // As root without a request flag there is no activity log: the kernel's JSON log has the egress only.
}

TEST_F(GuardFsGateTest, MonitorReportsAndLetsItOpen) {
  CommandResult r = gate({"--enforce-fs", "--fs-deny", "secret/"}, "cat " + work() + "/link");
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("the key"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("would block (monitor: it ran) open '"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 would be refused (--enforce-fs)"), std::string::npos) << r.err;
}

TEST_F(GuardFsGateTest, ADeniedProgramIsRefusedByPathThroughTheLoaderAndAsACopy) {
  if (!fs::exists("/usr/bin/curl") || !fs::exists("/lib64/ld-linux-x86-64.so.2"))
    GTEST_SKIP() << "needs /usr/bin/curl and the x86-64 loader";
  // A copy made before the guard starts: another inode, the same content.
  fs::copy_file("/usr/bin/curl", work() + "/mycurl");
  fs::permissions(work() + "/mycurl", fs::perms::owner_all);
  CommandResult r = gate(
      {"--enforce", "--enforce-fs", "--fs-deny-exec", "/usr/bin/curl"},
      "/usr/bin/curl --version >/dev/null; echo \"direct $?\"; /lib64/ld-linux-x86-64.so.2 /usr/bin/curl --version "
      ">/dev/null; echo \"loader $?\"; " +
          work() +
          "/mycurl --version >/dev/null; echo \"copy $?\"; "
          "/usr/bin/true; echo \"true $?\"");
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("direct 126"), std::string::npos) << r.describe();
  EXPECT_EQ(r.out.find("loader 0"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("copy 126"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("true 0"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("blocked exec '/usr/bin/curl' (--fs-deny-exec /usr/bin/curl)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("blocked open '/usr/bin/curl' (--fs-deny-exec /usr/bin/curl)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mycurl' (--fs-deny-exec /usr/bin/curl (the same content))"), std::string::npos) << r.err;
}

TEST_F(GuardFsGateTest, DefaultDenyAllowsOnlyWhatIsNamed) {
  CommandResult r = gate({"--enforce", "--enforce-fs", "--fs-default-deny", "--fs-allow", "/usr/", "--fs-allow", "/lib",
                          "--fs-allow", "/etc/", "--fs-allow", "/dev/", "--fs-allow", "existing.txt"},
                         "cat " + work() + "/existing.txt; cat " + work() + "/old.txt; echo \"old $?\"");
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("first"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("old 1"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("old.txt' (default)"), std::string::npos) << r.err;
}

TEST_F(GuardFsGateTest, AKilledGuardsCommandIsKilledByTheReaper) {
  ChildProcess g = ChildProcess::spawn(
      argv({"--enforce", "--enforce-fs", "--fs-deny", "secret/"}, "echo \"pid $$\"; exec sleep 300", true),
      {.env = env_});
  auto line = g.wait_line_starting("pid ", 30s);
  ASSERT_TRUE(line.has_value()) << g.describe();
  const pid_t sleeper = std::stoi(line->substr(4));
  ASSERT_EQ(::kill(sleeper, 0), 0);
  ::kill(g.pid(), SIGKILL);
  (void)g.wait(10s);
  // Gone (or a zombie waiting for whoever inherited it), not sleeping on.
  auto dead = [&] {
    std::ifstream st("/proc/" + std::to_string(sleeper) + "/stat");
    std::string all((std::istreambuf_iterator<char>(st)), {});
    return all.empty() || all.find(") Z ") != std::string::npos;
  };
  for (int i = 0; i < 200 && !dead(); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(dead()) << "the command outlived its killed guard (fanotify failed open)";
  if (!dead()) ::kill(sleeper, SIGKILL);
  // faultctl status sweeps the killed guard's record, pins and empty cgroup.
  const std::string cgroup = faultline::cgroup_mounts().v2 + "/faultline-guard-" + std::to_string(g.pid());
  for (int i = 0; i < 100 && fs::exists(cgroup); ++i) {
    (void)fltest::run_command({kFsFaultctl, "status"}, {.env = env_}, 30s);
    if (fs::exists(cgroup)) std::this_thread::sleep_for(100ms);
  }
  EXPECT_FALSE(fs::exists(cgroup)) << "faultctl status did not sweep the killed guard's cgroup";
}

TEST_F(GuardFsGateTest, FeaturesNameFanotifyForFileEnforcement) {
  CommandResult r = fltest::run_command({kFsFaultctl, "features"}, {.env = env_}, 60s);
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(fanotify_perm\s+yes)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(file/exec enforcement\n\s+uses:\s+fanotify permission events)")))
      << r.out;
}

TEST_F(GuardFsGateTest, BadFlagsAreRefusedByName) {
  struct Case {
    std::vector<std::string> flags;
    std::string said;
  };
  const Case cases[] = {
      {{"--fs-deny", "x"}, "--fs-deny goes with --enforce-fs"},
      {{"--enforce-fs"}, "--enforce-fs needs a rule"},
      {{"--enforce-fs", "--fs-deny", ""}, "--fs-deny: empty"},
      {{"--enforce-fs", "--fs-default-deny"}, "--fs-default-deny needs --fs-allow"},
      {{"--enforce-fs", "--fs-deny", "x", "--fs-allow", "/usr/"}, "--fs-allow applies to --fs-default-deny"},
      {{"--enforce-fs", "--fs-deny-exec", "/nonexistent/prog"}, "--fs-deny-exec /nonexistent/prog"},
      {{"--enforce-fs", "--fs-deny-exec", "/usr"}, "not a regular file"},
  };
  for (const Case& c : cases) {
    CommandResult r = gate(c.flags, "touch " + work() + "/ran");
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.said), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(work() + "/ran"));
  CommandResult u = fltest::run_command(argv({"--enforce-fs", "--fs-deny", "x"}, "true", false), {.env = env_}, 30s);
  EXPECT_TRUE(u.status.is(2)) << u.describe();
  EXPECT_NE(u.err.find("--enforce-fs needs root"), std::string::npos) << u.err;
}

}  // namespace
