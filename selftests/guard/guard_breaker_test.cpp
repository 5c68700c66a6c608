// faultctl guard --circuit-breaker end to end: the real faultctl (as nobody
// when root) runs a shell command whose requests (curl, through the guard's
// proxy, to a loopback upstream) add risk. Crossing the threshold revokes the
// egress and ends the command's process group (SIGTERM, then SIGKILL for a
// command that ignores it), and faultctl exits 9; under the threshold, or in
// monitor, the command runs to its end. Bad flags exit 2 naming the flag.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/tls/tls_harness.h"

namespace {

using fltest::CommandResult;
using fltest::UniqueFd;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kBreakerFaultctl = FAULTCTL_PATH;

class BreakerUpstream {
 public:
  BreakerUpstream()
      : server_([this](UniqueFd fd) {
          auto read = fltest::read_one_request(fd.get());
          if (!read) return;
          requests_.fetch_add(1);
          const std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
          (void)::send(fd.get(), resp.data(), resp.size(), MSG_NOSIGNAL);
        }) {}
  [[nodiscard]] uint16_t port() const { return server_.port(); }
  [[nodiscard]] std::string base() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  [[nodiscard]] int requests() const { return requests_.load(); }

 private:
  std::atomic<int> requests_{0};
  fltest::ScriptServer server_;
};

// Running (a zombie is dead: killed, waiting for whoever reaps orphans),
// asked for a few seconds: a SIGKILL is delivered, not awaited.
bool alive(pid_t pid) {
  for (int i = 0; i < 50; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) return false;
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z') return false;
    std::this_thread::sleep_for(100ms);
  }
  return true;
}

class GuardBreakerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path());
  }

  // As nobody when root, unless as_root (then the kernel's side runs too:
  // the command's cgroup, its connections captured).
  CommandResult guard(std::vector<std::string> flags, const std::string& script, bool as_root = false) {
    std::vector<std::string> argv = {kBreakerFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "sh", "-c", script});
    if (!as_root) argv = fltest::as_nobody(std::move(argv));
    return fltest::run_command(argv, {.env = env_}, 90s);
  }

  // N curl requests to the denied upstream, each printing its status.
  static std::string denied_requests(const BreakerUpstream& up, int n) {
    std::string s;
    for (int i = 0; i < n; ++i)
      s += "curl -sS -o /dev/null -w '%{http_code}\\n' --max-time 20 " + up.base() + "/x" + std::to_string(i) + "; ";
    return s;
  }

  std::vector<Json> lines_of(const std::string& kind) {
    return fltest::activity_of_kind(dir_.file("activity.jsonl"), kind);
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(GuardBreakerTest, CrossingTheThresholdEndsTheCommandsGroupAndExits9) {
  BreakerUpstream up;
  // Three denials of 25 cross 60. The command and a child it started ignore
  // SIGTERM, so only the SIGKILL after the grace ends them.
  const std::string script = "trap '' TERM; sleep 300 & echo $! > " + dir_.file("child.pid") + "; echo $$ > " +
                             dir_.file("shell.pid") + "; " + denied_requests(up, 3) + "sleep 300; echo survived";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = guard({"--enforce", "--deny", "127.0.0.1:" + std::to_string(up.port()), "--circuit-breaker",
                  "--breaker-threshold", "60"},
                 script);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(r.status.is(9)) << r.describe();
  EXPECT_LT(took, 60s);  // not the 300 s the command would have slept
  EXPECT_EQ(r.out.find("survived"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("403\n403\n403"), std::string::npos) << r.out;
  EXPECT_EQ(up.requests(), 0);
  EXPECT_NE(r.err.find("CIRCUIT BREAKER tripped (score 75 of 60 within 60s, last block: rule --deny 127.0.0.1:"),
            std::string::npos)
      << r.err;
  const auto breaker = lines_of("breaker");
  ASSERT_EQ(breaker.size(), 1u);
  EXPECT_EQ(breaker[0].value("verdict", ""), "deny");
  for (const char* f : {"child.pid", "shell.pid"}) {
    std::ifstream in(dir_.file(f));
    pid_t pid = 0;
    ASSERT_TRUE(in >> pid) << f;
    EXPECT_FALSE(alive(pid)) << f << " " << pid << " outlived the breaker";
  }
}

TEST_F(GuardBreakerTest, AsRootTheCapturedCommandIsEndedToo) {
  if (::geteuid() != 0) GTEST_SKIP() << "*** SKIPPED: needs root (the guard's cgroup and transparent capture) ***";
  BreakerUpstream up;
  const std::string script = "trap '' TERM; sleep 300 & echo $! > " + dir_.file("child.pid") + "; " +
                             denied_requests(up, 3) + "sleep 300; echo survived";
  auto r = guard({"--enforce", "--terminate-tls", "--deny", "GET 127.0.0.1:" + std::to_string(up.port()),
                  "--circuit-breaker", "--breaker-threshold", "60"},
                 script, true);
  EXPECT_TRUE(r.status.is(9)) << r.describe();
  EXPECT_EQ(r.out.find("survived"), std::string::npos) << r.out;
  EXPECT_EQ(up.requests(), 0);
  EXPECT_NE(r.err.find("CIRCUIT BREAKER tripped (score 75 of 60"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the kernel fence is revoked: every connect and send of the command's cgroup is refused"),
            std::string::npos)
      << r.err;
  std::ifstream in(dir_.file("child.pid"));
  pid_t pid = 0;
  ASSERT_TRUE(in >> pid);
  EXPECT_FALSE(alive(pid)) << pid << " outlived the breaker";
}

TEST_F(GuardBreakerTest, AHoneytokenAloneTripsTheDefaultThreshold) {
  BreakerUpstream up;
  auto r = guard({"--enforce", "--honeytokens", "--circuit-breaker"},
                 "trap '' TERM; curl -sS -o /dev/null -w '%{http_code}\\n' --max-time 20 -H \"X-K: $GITHUB_TOKEN\" " +
                     up.base() + "/up; sleep 300; echo survived");
  EXPECT_TRUE(r.status.is(9)) << r.describe();
  EXPECT_NE(r.out.find("403"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("survived"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("CIRCUIT BREAKER tripped (score 100 of 100 within 60s, last honeytoken: github_token"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(up.requests(), 0);
}

TEST_F(GuardBreakerTest, UnderTheThresholdTheCommandRunsToItsEnd) {
  BreakerUpstream up;
  auto r = guard({"--enforce", "--deny", "127.0.0.1:" + std::to_string(up.port()), "--circuit-breaker"},
                 denied_requests(up, 3) + "exit 4");
  EXPECT_TRUE(r.status.is(4)) << r.describe();
  EXPECT_EQ(r.err.find("CIRCUIT BREAKER"), std::string::npos) << r.err;
}

TEST_F(GuardBreakerTest, MonitorReportsWouldTripAndEndsNothing) {
  BreakerUpstream up;
  auto r = guard({"--deny", "127.0.0.1:" + std::to_string(up.port()), "--circuit-breaker", "--breaker-threshold", "50"},
                 denied_requests(up, 3) + "exit 0");
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(up.requests(), 3);
  EXPECT_NE(r.err.find("CIRCUIT BREAKER would trip (score 50 of 50"), std::string::npos) << r.err;
}

TEST_F(GuardBreakerTest, BadFlagsAreRefusedWithExit2) {
  auto r = guard({"--circuit-breaker", "--breaker-threshold", "0"}, "true");
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--breaker-threshold"), std::string::npos) << r.err;
  r = guard({"--circuit-breaker", "--breaker-window", "soon"}, "true");
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--breaker-window"), std::string::npos) << r.err;
  r = guard({"--circuit-breaker", "--breaker-window", "500ms"}, "true");
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--breaker-window 500ms: between 1s and 24h"), std::string::npos) << r.err;
  r = guard({"--breaker-threshold", "10"}, "true");
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--breaker-threshold applies to --circuit-breaker"), std::string::npos) << r.err;
  // A gateway runs no command to end or to give decoys.
  for (const char* flag : {"--circuit-breaker", "--honeytokens"}) {
    auto g = fltest::run_command(fltest::as_nobody({kBreakerFaultctl, "guard", "--gateway", "--addr", "127.0.0.1:0",
                                                    "--gateway-token", "a=12345678", flag}),
                                 {.env = env_}, 30s);
    EXPECT_TRUE(g.status.is(2)) << g.describe();
    EXPECT_NE(g.err.find(std::string(flag) + " "), std::string::npos) << g.err;
  }
}

}  // namespace
