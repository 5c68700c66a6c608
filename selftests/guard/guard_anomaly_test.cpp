// faultctl guard --anomaly end to end: the real faultctl (as nobody when
// root) learns the destinations (host:port) the command reaches during a 3 s
// warm-up (curl through the guard's proxy to a loopback upstream); after it,
// one not seen (a second upstream) is flagged once, and with --block-dangerous
// a program not run in it, on stderr and in
// the activity log (kind anomaly), and nothing is stopped; nothing is flagged
// during the warm-up. Bad flags exit 2 naming the flag.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/tls/tls_harness.h"

namespace {

using fltest::CommandResult;
using fltest::UniqueFd;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kAnomalyFaultctl = FAULTCTL_PATH;

class AnomalyUpstream {
 public:
  AnomalyUpstream()
      : server_([this](UniqueFd fd) {
          if (!fltest::read_one_request(fd.get())) return;
          requests_.fetch_add(1);
          const std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
          (void)::send(fd.get(), resp.data(), resp.size(), MSG_NOSIGNAL);
        }) {}
  [[nodiscard]] std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(server_.port()) + path;
  }
  [[nodiscard]] std::string destination() const { return "127.0.0.1:" + std::to_string(server_.port()); }
  [[nodiscard]] int requests() const { return requests_.load(); }

 private:
  std::atomic<int> requests_{0};
  fltest::ScriptServer server_;
};

class GuardAnomalyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path());
  }

  CommandResult guard(std::vector<std::string> flags, const std::string& script) {
    std::vector<std::string> argv = {kAnomalyFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "sh", "-c", script});
    return fltest::run_command(fltest::as_nobody(std::move(argv)), {.env = env_}, 60s);
  }

  static std::string curl(const std::string& url) {
    return "curl -sS -o /dev/null -w '%{http_code}\\n' --max-time 20 " + url + "; ";
  }

  std::vector<Json> lines_of(const std::string& kind) {
    return fltest::activity_of_kind(dir_.file("activity.jsonl"), kind);
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(GuardAnomalyTest, AHostNotSeenInTheWarmUpIsFlaggedOnceAndNotStopped) {
  AnomalyUpstream up, other;
  const std::string script = curl(up.url("/learn")) + "sleep 4; " + curl(up.url("/known")) + curl(other.url("/new")) +
                             curl(other.url("/again"));
  auto r = guard({"--anomaly", "--anomaly-learn", "3s"}, script);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("200\n200\n200\n200"), std::string::npos) << r.out;
  EXPECT_EQ(up.requests(), 2);
  EXPECT_EQ(other.requests(), 2);
  EXPECT_NE(r.err.find("faultline guard: anomaly: a destination not seen in the warm-up: " + other.destination() +
                       " (monitor"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("warm-up: " + up.destination()), std::string::npos) << r.err;
  const auto lines = lines_of("anomaly");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].value("host", ""), other.destination());
  EXPECT_EQ(lines[0].value("verdict", ""), "allow");
}

TEST_F(GuardAnomalyTest, NothingIsFlaggedDuringTheWarmUp) {
  AnomalyUpstream up, other;
  auto r = guard({"--anomaly", "--anomaly-learn", "1h"}, curl(up.url("/a")) + curl(other.url("/b")));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(up.requests() + other.requests(), 2);
  EXPECT_EQ(r.err.find("anomaly:"), std::string::npos) << r.err;
  EXPECT_TRUE(lines_of("anomaly").empty());
}

TEST_F(GuardAnomalyTest, WithTheExecGateAProgramNotRunInTheWarmUpIsFlaggedOnce) {
  // /bin/echo runs in the warm-up and after it; /usr/bin/id only after it, twice.
  const std::string script = "/bin/echo learn; sleep 4; /bin/echo known; /usr/bin/id -u; /usr/bin/id -u";
  auto r = guard({"--anomaly", "--anomaly-learn", "3s", "--block-dangerous"}, script);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("learn\nknown\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("faultline guard: anomaly: a program not run in the warm-up: /usr/bin/id, pid "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("warm-up: /bin/echo"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("warm-up: /bin/sh"), std::string::npos) << r.err;
  const auto lines = lines_of("anomaly");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].value("method", ""), "EXEC");
  EXPECT_EQ(lines[0].value("path", ""), "/usr/bin/id");
}

TEST_F(GuardAnomalyTest, BadFlagsExit2NamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--anomaly-learn", "1s"}, "--anomaly-learn applies to --anomaly"},
      {{"--anomaly", "--anomaly-learn", "later"}, "--anomaly-learn"},
      {{"--anomaly", "--anomaly-learn", "10ms"}, "--anomaly-learn 10ms: between 100ms and 24h"},
      {{"--anomaly", "--anomaly-learn", "25h"}, "--anomaly-learn 25h: between 100ms and 24h"},
  };
  for (const auto& [flags, said] : cases) {
    auto r = guard(flags, "touch " + dir_.file("ran"));
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(said), std::string::npos) << said << "\n" << r.err;
    EXPECT_FALSE(std::ifstream(dir_.file("ran")).good()) << said;
  }
}

}  // namespace
