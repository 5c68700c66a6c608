// faultctl guard --receipts end to end: the real faultctl (as nobody when
// root) with curl through its proxy against a loopback stand-in model that
// answers "all tests pass and the build succeeds". The request's history
// decides: no tool run (both unverified), a passing pytest run (tests
// verified), a failing make (build unverified), a build without a clear
// output (unknown). Each claim is a line; unverified ones are findings
// (kind unverified-claim). Nothing is blocked.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/tls/tls_harness.h"

namespace {

using fltest::CommandResult;
using fltest::UniqueFd;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kReceiptsFaultctl = FAULTCTL_PATH;

class ClaimingModel {
 public:
  ClaimingModel()
      : server_([](UniqueFd fd) {
          if (!fltest::read_one_request(fd.get())) return;
          const std::string body = Json{{"id", "msg_1"},
                                        {"type", "message"},
                                        {"role", "assistant"},
                                        {"model", "claude-test"},
                                        {"content", {{{"type", "text"}, {"text", kClaim}}}},
                                        {"stop_reason", "end_turn"},
                                        {"usage", {{"input_tokens", 3}, {"output_tokens", 9}}}}
                                       .dump();
          const std::string resp =
              "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
              "\r\nConnection: close\r\n\r\n" + body;
          (void)::send(fd.get(), resp.data(), resp.size(), MSG_NOSIGNAL);
        }) {}
  [[nodiscard]] std::string base() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  static constexpr const char* kClaim = "Done: all tests pass and the build succeeds.";

 private:
  fltest::ScriptServer server_;
};

// A Messages call whose history ran `command` and got `output` back.
Json call_with(const std::vector<std::pair<std::string, std::string>>& runs) {
  Json messages = Json::array({{{"role", "user"}, {"content", "Fix the failing test, then build."}}});
  int n = 0;
  for (const auto& [command, output] : runs) {
    const std::string id = "toolu_" + std::to_string(++n);
    messages.push_back(
        {{"role", "assistant"},
         {"content", {{{"type", "tool_use"}, {"id", id}, {"name", "bash"}, {"input", {{"command", command}}}}}}});
    Json result = {{"type", "tool_result"}, {"tool_use_id", id}, {"content", output}};
    messages.push_back({{"role", "user"}, {"content", Json::array({result})}});
  }
  return {{"model", "claude-test"}, {"max_tokens", 64}, {"messages", messages}};
}

class GuardReceiptsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path());
  }

  CommandResult post(std::vector<std::string> flags, const Json& body) {
    fltest::write_file(dir_.file("body.json"), body.dump());
    EXPECT_EQ(::chmod(dir_.file("body.json").c_str(), 0644), 0);
    std::vector<std::string> argv = {kReceiptsFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "curl", "-sS", "--max-time", "20", "-H",
                             "Content-Type: application/json", "--data-binary", "@" + dir_.file("body.json"),
                             model_.base() + "/v1/messages"});
    return fltest::run_command(fltest::as_nobody(std::move(argv)), {.env = env_}, 90s);
  }

  // rule -> kind of each claim line of the last run.
  std::vector<std::pair<std::string, std::string>> claims() {
    std::ifstream in(dir_.file("activity.jsonl"));
    std::vector<std::pair<std::string, std::string>> out;
    for (std::string line; std::getline(in, line);) {
      auto j = Json::parse(line, nullptr, false);
      const std::string kind = j.is_object() ? j.value("kind", "") : "";
      if (kind == "receipt" || kind == "unverified-claim") out.emplace_back(j.value("rule", ""), kind);
    }
    ::unlink(dir_.file("activity.jsonl").c_str());
    return out;
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
  ClaimingModel model_;
};

using Claims = std::vector<std::pair<std::string, std::string>>;

TEST_F(GuardReceiptsTest, ClaimsAreCheckedAgainstTheToolRunsOfTheHistory) {
  auto r = post({"--receipts"}, call_with({}));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find(ClaimingModel::kClaim), std::string::npos) << r.out;  // forwarded
  EXPECT_EQ(claims(), (Claims{{"unverified-claim", "unverified-claim"}, {"unverified-claim", "unverified-claim"}}));
  EXPECT_NE(r.err.find("unverified-claim: 'tests pass' unverified (no tool call of the session ran one)"),
            std::string::npos)
      << r.err;

  r = post({"--receipts"}, call_with({{"pytest -q", "....\n4 passed in 0.12s"}}));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(claims(), (Claims{{"receipts/verified", "receipt"}, {"unverified-claim", "unverified-claim"}}));
  EXPECT_NE(r.err.find("receipt: 'tests pass' verified (the last run's output says so)"), std::string::npos) << r.err;

  r = post({"--receipts"}, call_with({{"pytest -q", "1 failed, 3 passed"}, {"make", "make: *** [all] Error 2"}}));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(claims(), (Claims{{"unverified-claim", "unverified-claim"}, {"unverified-claim", "unverified-claim"}}));
  EXPECT_NE(r.err.find("unverified-claim: 'build succeeds' unverified (the last run's output says it failed)"),
            std::string::npos)
      << r.err;

  r = post({"--receipts"}, call_with({{"pytest", "4 passed"}, {"make -j4", "cc -o app main.o"}}));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(claims(), (Claims{{"receipts/verified", "receipt"}, {"receipts/unknown", "receipt"}}));
}

TEST_F(GuardReceiptsTest, WithoutTheFlagNoClaimIsChecked) {
  auto r = post({}, call_with({}));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_TRUE(claims().empty());
}

}  // namespace
