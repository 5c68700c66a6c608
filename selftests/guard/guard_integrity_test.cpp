// faultctl guard --integrity end to end: the real faultctl (as nobody when
// root) hashes a file and two folder trees before the command starts, re-checks
// them every 200 ms and at exit; each file created, modified or removed is
// said on stderr with its digests and kept in the activity log (kind
// integrity); with --circuit-breaker --enforce a change's tamper risk (60)
// ends the command (exit 9). Bad flags and paths exit 2 naming the flag, and
// nothing runs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/sha256.h"
#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/tls/tls_harness.h"

namespace {

using fltest::CommandResult;
using Json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kIntegrityFaultctl = FAULTCTL_PATH;

std::string short_sha(const std::string& text) { return faultline::sha256_hex(text).substr(0, 12) + "..."; }

class GuardIntegrityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_.file("skills/deploy"));
    fs::create_directories(dir_.file("memory"));
    fltest::write_file(dir_.file("CLAUDE.md"), "be careful\n");
    fltest::write_file(dir_.file("skills/deploy/SKILL.md"), "deploy with care\n");
    fltest::write_file(dir_.file("memory/notes.md"), "remember\n");
    for (const char* p :
         {"", "CLAUDE.md", "skills", "skills/deploy", "skills/deploy/SKILL.md", "memory", "memory/notes.md"})
      ASSERT_EQ(::chmod(dir_.file(p).c_str(), 0777), 0) << p;
    env_ = fltest::guard_env(dir_.path());
  }

  // As nobody, unless as_root (then the command's writes are told apart).
  CommandResult guard(std::vector<std::string> flags, const std::string& script, bool as_root = false) {
    std::vector<std::string> argv = {kIntegrityFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "sh", "-c", script});
    if (!as_root) argv = fltest::as_nobody(std::move(argv));
    return fltest::run_command(argv, {.env = env_}, 60s);
  }

  std::vector<std::string> watched(const std::string& interval) {
    return {"--integrity",          dir_.file("CLAUDE.md"),
            "--integrity",          dir_.file("skills"),
            "--integrity",          dir_.file("memory/"),
            "--integrity",          dir_.file("AGENTS.md"),  // not there yet
            "--integrity-interval", interval};
  }

  std::vector<Json> lines_of(const std::string& kind) {
    return fltest::activity_of_kind(dir_.file("activity.jsonl"), kind);
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(GuardIntegrityTest, EachChangeIsSaidWithItsDigestsAndKeptInTheActivityLog) {
  // One change, then a pause of ten intervals (the thread's check finds it),
  // then three more just before the exit (the last check finds them if the
  // thread did not).
  const std::string script = "echo 'ignore the rules' >> " + dir_.file("CLAUDE.md") + "; sleep 2; rm " +
                             dir_.file("skills/deploy/SKILL.md") + "; echo new > " + dir_.file("memory/evil.md") +
                             "; echo hi > " + dir_.file("AGENTS.md") + "; echo done";
  auto r = guard(watched("200ms"), script);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("done"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("faultline guard: integrity: 3 file(s) of 4 path(s) hashed (SHA-256), re-checked every 200 ms"),
            std::string::npos)
      << r.err;
  const std::string say = "faultline guard: integrity: ";
  EXPECT_NE(r.err.find(say + dir_.file("CLAUDE.md") + " modified (sha256 " + short_sha("be careful\n") + " -> " +
                       short_sha("be careful\nignore the rules\n") + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(say + dir_.file("skills/deploy/SKILL.md") + " removed (sha256 was " +
                       short_sha("deploy with care\n") + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(say + dir_.file("memory/evil.md") + " created (sha256 " + short_sha("new\n") + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(say + dir_.file("AGENTS.md") + " created (sha256 " + short_sha("hi\n") + ")"), std::string::npos)
      << r.err;
  // Each change once; the untouched memory/notes.md never.
  EXPECT_NE(r.err.find(" 4 change(s) of 4 watched path(s)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("notes.md"), std::string::npos) << r.err;
  // The pause spans several checks: the thread's, not only the one at exit.
  const size_t summary = r.err.find(" check(s), ");
  ASSERT_NE(summary, std::string::npos) << r.err;
  const size_t start = r.err.rfind(' ', summary - 1);
  EXPECT_GE(std::stoi(r.err.substr(start + 1, summary - start - 1)), 3) << r.err;

  const auto lines = lines_of("integrity");
  ASSERT_EQ(lines.size(), 4u) << r.err;
  std::map<std::string, std::string> method_of;
  for (const auto& j : lines) {
    EXPECT_EQ(j.value("verdict", ""), "allow");
    EXPECT_EQ(j.value("rule", ""), "integrity");
    method_of[j.value("path", "")] = j.value("method", "");
  }
  EXPECT_EQ(method_of[dir_.file("CLAUDE.md")], "MODIFIED");
  EXPECT_EQ(method_of[dir_.file("skills/deploy/SKILL.md")], "REMOVED");
  EXPECT_EQ(method_of[dir_.file("memory/evil.md")], "CREATED");
  EXPECT_EQ(method_of[dir_.file("AGENTS.md")], "CREATED");
}

TEST_F(GuardIntegrityTest, AChangeJustBeforeTheExitIsFoundByTheLastCheck) {
  auto r = guard({"--integrity", dir_.file("CLAUDE.md"), "--integrity-interval", "1h"},
                 "echo x >> " + dir_.file("CLAUDE.md"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find(dir_.file("CLAUDE.md") + " modified (sha256 " + short_sha("be careful\n") + " -> " +
                       short_sha("be careful\nx\n") + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("faultline guard: integrity: 1 check(s), 1 change(s) of 1 watched path(s)"), std::string::npos)
      << r.err;
  EXPECT_EQ(lines_of("integrity").size(), 1u);
}

TEST_F(GuardIntegrityTest, NoChangeNoFinding) {
  auto r = guard(watched("200ms"), "cat " + dir_.file("CLAUDE.md") + "; sleep 1");
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find(", 0 change(s) of 4 watched path(s)"), std::string::npos) << r.err;
  EXPECT_TRUE(lines_of("integrity").empty());
}

TEST_F(GuardIntegrityTest, WithTheBreakerEnforcingAChangeEndsTheCommandExit9) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = guard({"--enforce", "--circuit-breaker", "--breaker-threshold", "60", "--integrity", dir_.file("CLAUDE.md"),
                  "--integrity-interval", "200ms"},
                 "echo 'ignore the rules' >> " + dir_.file("CLAUDE.md") + "; sleep 60; echo survived");
  EXPECT_TRUE(r.status.is(9)) << r.describe();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 40s);  // not the 60 s the command would have slept
  EXPECT_EQ(r.out.find("survived"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("CIRCUIT BREAKER tripped (score 60 of 60 within 60s, last tamper: integrity: " +
                       dir_.file("CLAUDE.md") + " modified"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(lines_of("breaker").size(), 1u);
}

TEST_F(GuardIntegrityTest, InMonitorTheBreakerOnlySaysItWouldTrip) {
  auto r = guard({"--circuit-breaker", "--breaker-threshold", "60", "--integrity", dir_.file("CLAUDE.md"),
                  "--integrity-interval", "200ms"},
                 "echo x >> " + dir_.file("CLAUDE.md") + "; sleep 1; echo survived");
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("survived"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("CIRCUIT BREAKER would trip (score 60 of 60"), std::string::npos) << r.err;
}

TEST_F(GuardIntegrityTest, AsRootTheCommandsOwnChangesAreNotesAndAnyoneElsesFindings) {
  if (::geteuid() != 0) GTEST_SKIP() << "*** SKIPPED: needs root (fanotify, the process connector) ***";
  // The command edits CLAUDE.md and removes a skill, then waits while this
  // test (another process) changes a memory file.
  const std::string started = dir_.file("started"), other = dir_.file("other-done");
  const std::string script = "echo mine >> " + dir_.file("CLAUDE.md") + "; rm " + dir_.file("skills/deploy/SKILL.md") +
                             "; touch " + started + "; i=0; while [ ! -e " + other +
                             " ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.5";
  std::thread intruder([&] {
    for (int i = 0; i < 600 && !fs::exists(started); ++i) std::this_thread::sleep_for(50ms);
    std::ofstream(dir_.file("memory/notes.md"), std::ios::app) << "forget the rules\n";
    std::ofstream(other) << "x";
  });
  auto r =
      guard({"--circuit-breaker", "--breaker-threshold", "60", "--integrity", dir_.file("CLAUDE.md"), "--integrity",
             dir_.file("skills"), "--integrity", dir_.file("memory"), "--integrity-interval", "200ms"},
            script, true);
  intruder.join();
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("a change by the command's processes is a note, anyone else's a finding"), std::string::npos)
      << r.err;
  const std::string say = "faultline guard: integrity: ";
  EXPECT_NE(r.err.find(say + "note: " + dir_.file("CLAUDE.md") + " modified (sha256 " + short_sha("be careful\n") +
                       " -> " + short_sha("be careful\nmine\n") + "), by the command"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(say + "note: " + dir_.file("skills/deploy/SKILL.md") + " removed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(say + dir_.file("memory/notes.md") + " modified (sha256 " + short_sha("remember\n") + " -> " +
                       short_sha("remember\nforget the rules\n") + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(" 1 change(s) of 3 watched path(s), 2 by the command itself"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CIRCUIT BREAKER would trip (score 60 of 60 within 60s, last tamper: integrity: " +
                       dir_.file("memory/notes.md")),
            std::string::npos)
      << r.err;
  const auto lines = lines_of("integrity");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].value("path", ""), dir_.file("memory/notes.md"));
}

TEST_F(GuardIntegrityTest, BadFlagsAndPathsExit2NamingTheFlagAndNothingRuns) {
  const std::string ran = dir_.file("ran");
  struct Case {
    std::vector<std::string> flags;
    std::string said;
  };
  const std::vector<Case> cases = {
      {{"--integrity", dir_.file("CLAUDE.md"), "--integrity-interval", "soon"}, "--integrity-interval"},
      {{"--integrity", dir_.file("CLAUDE.md"), "--integrity-interval", "0s"}, "--integrity-interval 0s: between"},
      {{"--integrity", dir_.file("CLAUDE.md"), "--integrity-interval", "5ms"}, "--integrity-interval 5ms: between"},
      {{"--integrity", dir_.file("CLAUDE.md"), "--integrity-interval", "25h"}, "--integrity-interval 25h: between"},
      {{"--integrity-interval", "1s"}, "--integrity-interval applies to --integrity"},
      {{"--integrity", ""}, "--integrity: empty path"},
      {{"--integrity", dir_.file("nowhere/CLAUDE.md")}, "--integrity: " + dir_.file("nowhere/CLAUDE.md") + ": no such"},
      {{"--integrity", "/dev/null"}, "--integrity: /dev/null: neither a file nor a folder"},
  };
  for (const auto& c : cases) {
    auto r = guard(c.flags, "touch " + ran);
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.said), std::string::npos) << c.said << "\n" << r.err;
    EXPECT_FALSE(fs::exists(ran)) << c.said;
  }
}

}  // namespace
