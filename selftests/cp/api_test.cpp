// faultcp's API over HTTP on both backends: identity and tokens, the login
// rate limits, workspace isolation on every route, the agents' long poll,
// the experiment life cycle, the kill switch, the audit chain and bad input.
#include <gtest/gtest.h>

#include <future>
#include <span>

#include "cp/proto/agent.pb.h"
#include "cp/proto/agent_wire.h"
#include "cp_client.h"
#include "userspace/faults/experiment_guardrails.h"
#include "userspace/faults/packet/experiment.h"
#include "userspace/faults/resource/experiment.h"
#include "userspace/faults/stream/experiment.h"
#include "userspace/faults/syscall/experiment.h"
#include "userspace/ops/experiment.h"
#include "userspace/policy/policy.h"

namespace {

using faultline::experiment_from_json;
using faultline::guardrail_fields;
using faultline::http_experiment_fields;
using faultline::is_guardrail_field;
using faultline::packet_experiment_fields;
using faultline::resource_experiment_fields;
using faultline::syscall_experiment_fields;
using faultline::tcp_experiment_fields;
using fltest::Backend;
using fltest::CpReply;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Tenant {
  std::string token;  // a session token
  int64_t workspace_id = 0;
  int64_t agent_id = 0;
  std::string agent_token;
};

const char* kPassword = "correct horse battery staple";

std::string latency_spec(int delay_ms = 100) {
  return R"({"kind":"latency","target":"10.0.0.0/8","delay_ms":)" + std::to_string(delay_ms) + R"(,"duration_sec":30})";
}

class ApiTest : public ::testing::TestWithParam<Backend> {
 protected:
  void start(faultline::cp::ControlPlaneConfig config = fltest::test_config()) {
    server_ = std::make_unique<fltest::CpServer>(GetParam(), config);
  }
  void SetUp() override { start(); }

  CpReply call(const std::string& method, const std::string& path, const std::string& token = "",
               const std::string& body = "", int timeout_ms = 10'000) {
    return server_->call(method, path, token, body, timeout_ms);
  }

  // A workspace with its first user, and (with_agent) one enrolled agent.
  Tenant tenant(const std::string& name, bool with_agent = true) {
    Tenant t;
    auto r = call("POST", "/v1/auth/signup", "",
                  json{{"email", name + "@example.com"}, {"password", kPassword}, {"workspace", name}}.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    t.token = r.json().value("token", "");
    t.workspace_id = r.json().value("workspace_id", int64_t{0});
    if (!with_agent) return t;
    auto enr = call("POST", "/v1/tokens", t.token, R"({"kind":"enrollment","name":"fleet"})");
    EXPECT_EQ(enr.status, 201) << enr.describe();
    auto reg = call("POST", "/v1/agents/register", enr.json().value("token", ""),
                    R"({"hostname":")" + name +
                        R"(-host","kernel":"6.1.0","instance_id":"i-1","device":"eth0",)"
                        R"("version":"0.1","features":{"tcx":true}})");
    EXPECT_EQ(reg.status, 201) << reg.describe();
    t.agent_id = reg.json().value("agent_id", int64_t{0});
    t.agent_token = reg.json().value("token", "");
    return t;
  }

  int64_t experiment(const Tenant& t, const std::string& spec = latency_spec()) {
    auto r = call("POST", "/v1/experiments", t.token,
                  R"({"agent_id":)" + std::to_string(t.agent_id) + R"(,"spec":)" + spec + "}");
    EXPECT_EQ(r.status, 201) << r.describe();
    return r.json().value("id", int64_t{0});
  }

  std::string next_path(const Tenant& t, int wait_ms = -1) {
    return "/v1/agents/" + std::to_string(t.agent_id) + "/next" +
           (wait_ms >= 0 ? "?wait_ms=" + std::to_string(wait_ms) : "");
  }
  CpReply event(const Tenant& t, int64_t exp, const std::string& type, const std::string& extra = "") {
    return call("POST", "/v1/agents/" + std::to_string(t.agent_id) + "/events", t.agent_token,
                R"({"experiment_id":)" + std::to_string(exp) + R"(,"type":")" + type + "\"" + extra + "}");
  }
  std::string state_of(const Tenant& t, int64_t exp) {
    return call("GET", "/v1/experiments/" + std::to_string(exp), t.token).json().value("status", "");
  }

  int64_t register_agent(const std::string& token, const std::string& host, const std::string& labels,
                         std::string* agent_token) {
    auto enr = call("POST", "/v1/tokens", token, R"({"kind":"enrollment"})").json().value("token", "");
    auto reg = call("POST", "/v1/agents/register", enr, R"({"hostname":")" + host + R"(","labels":)" + labels + "}");
    EXPECT_EQ(reg.status, 201) << reg.describe();
    if (agent_token) *agent_token = reg.json().value("token", "");
    return reg.json().value("agent_id", int64_t{0});
  }

  json agent_row(const std::string& token, int64_t id) {
    return call("GET", "/v1/agents/" + std::to_string(id), token).json();
  }

  std::unique_ptr<fltest::CpServer> server_;
};

TEST_P(ApiTest, SignupLoginAndTokensWithRevocationOnTheNextRequest) {
  Tenant t = tenant("acme", false);
  EXPECT_EQ(t.token.rfind("flcp_sess_", 0), 0u) << t.token;
  EXPECT_EQ(call("GET", "/v1/agents", t.token).status, 200);
  auto dup = call("POST", "/v1/auth/signup", "",
                  json{{"email", "other@example.com"}, {"password", kPassword}, {"workspace", "acme"}}.dump());
  EXPECT_EQ(dup.status, 409) << dup.describe();
  EXPECT_EQ(dup.json().value("field", ""), "workspace");

  auto wrong = call("POST", "/v1/auth/login", "", json{{"email", "acme@example.com"}, {"password", "nope"}}.dump());
  EXPECT_EQ(wrong.status, 401) << wrong.describe();
  auto unknown = call("POST", "/v1/auth/login", "", json{{"email", "who@example.com"}, {"password", "x"}}.dump());
  EXPECT_EQ(unknown.status, 401);
  EXPECT_EQ(unknown.json().value("error", ""), wrong.json().value("error", "")) << "says which emails exist";
  auto ok = call("POST", "/v1/auth/login", "", json{{"email", "ACME@example.com"}, {"password", kPassword}}.dump());
  ASSERT_EQ(ok.status, 200) << ok.describe();
  const std::string session2 = ok.json().value("token", "");
  EXPECT_NE(session2, t.token);

  auto api = call("POST", "/v1/tokens", session2, R"({"kind":"api","name":"ci"})");
  ASSERT_EQ(api.status, 201) << api.describe();
  const std::string api_token = api.json().value("token", "");
  EXPECT_EQ(api_token.rfind("flcp_api_", 0), 0u);
  EXPECT_EQ(call("GET", "/v1/experiments", api_token).status, 200);
  EXPECT_EQ(call("POST", "/v1/tokens", api_token, R"({"kind":"api"})").status, 403) << "an API token minted tokens";
  auto list = call("GET", "/v1/tokens", t.token).json();
  ASSERT_EQ(list["tokens"].size(), 3u);
  for (const auto& row : list["tokens"]) EXPECT_FALSE(row.contains("token")) << "a list shows a secret: " << row;
  auto revoked = call("DELETE", "/v1/tokens/" + std::to_string(api.json().value("id", 0)), t.token);
  EXPECT_EQ(revoked.status, 200) << revoked.describe();
  auto after = call("GET", "/v1/experiments", api_token);
  EXPECT_EQ(after.status, 401) << "a revoked token still works: " << after.describe();
  EXPECT_NE(after.body.find("revoked"), std::string::npos) << after.body;
  EXPECT_EQ(call("GET", "/v1/experiments", "flcp_api_" + std::string(43, 'A')).status, 401);
  EXPECT_EQ(call("GET", "/v1/experiments", "not-a-token").status, 401);
  EXPECT_EQ(call("GET", "/v1/experiments").status, 401);
}

TEST_P(ApiTest, ASessionExpires) {
  auto config = fltest::test_config();
  config.session_ttl = std::chrono::milliseconds(500);
  start(config);
  Tenant t = tenant("brief", false);
  EXPECT_EQ(call("GET", "/v1/agents", t.token).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  auto r = call("GET", "/v1/agents", t.token);
  EXPECT_EQ(r.status, 401) << r.describe();
  EXPECT_NE(r.body.find("expired"), std::string::npos) << r.body;
}

TEST_P(ApiTest, LoginIsRateLimitedPerAccountAndPerAddress) {
  auto config = fltest::test_config();
  config.login_per_account = {3, std::chrono::milliseconds(60'000)};
  config.login_per_address = {8, std::chrono::milliseconds(60'000)};
  start(config);
  (void)tenant("one", false);  // 1 of the address's 8
  (void)tenant("two", false);  // 2
  const auto wrong = json{{"email", "one@example.com"}, {"password", "wrong password"}}.dump();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(call("POST", "/v1/auth/login", "", wrong).status, 401);  // 5
  auto locked = call("POST", "/v1/auth/login", "", json{{"email", "one@example.com"}, {"password", kPassword}}.dump());
  EXPECT_EQ(locked.status, 429) << "the account's failures did not lock it: " << locked.describe();  // 6
  EXPECT_NE(locked.head.find("Retry-After: "), std::string::npos) << locked.head;
  const auto two = json{{"email", "two@example.com"}, {"password", kPassword}}.dump();
  EXPECT_EQ(call("POST", "/v1/auth/login", "", two).status, 200) << "another account is not locked";  // 7
  EXPECT_EQ(call("POST", "/v1/auth/login", "", two).status, 200);                                     // 8
  EXPECT_EQ(call("POST", "/v1/auth/login", "", two).status, 429) << "the address is over its limit";
}

// Workspace A's tokens against every route that names an object, given B's
// objects: 404 each time (not 403, not B's data), and B's objects unchanged.
TEST_P(ApiTest, EveryRouteAnswers404ForAnotherWorkspacesObjects) {
  Tenant a = tenant("alpha");
  Tenant b = tenant("bravo");
  const int64_t b_exp = experiment(b);
  const int64_t a_exp = experiment(a);
  auto b_api = call("POST", "/v1/tokens", b.token, R"({"kind":"api"})").json().value("id", int64_t{0});
  ASSERT_EQ(call("PUT", "/v1/policy", b.token,
                 nlohmann::json{{"policy",
                                 "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: bravo-egress}\n"
                                 "spec: {egress: [{all: true, rules: []}]}\n"}}
                     .dump())
                .status,
            201);
  const std::string B_AGENT = std::to_string(b.agent_id), B_EXP = std::to_string(b_exp);
  struct Case {
    std::string method, path, token, body;
  };
  const std::vector<Case> walk = {
      {"GET", "/v1/agents/" + B_AGENT, a.token, ""},
      {"GET", "/v1/agents/" + B_AGENT + "/next?wait_ms=0", a.agent_token, ""},
      {"POST", "/v1/agents/" + B_AGENT + "/events", a.agent_token,
       R"({"experiment_id":)" + B_EXP + R"(,"type":"running"})"},
      // A's own agent reporting on B's experiment.
      {"POST", "/v1/agents/" + std::to_string(a.agent_id) + "/events", a.agent_token,
       R"({"experiment_id":)" + B_EXP + R"(,"type":"running"})"},
      {"GET", "/v1/experiments/" + B_EXP, a.token, ""},
      {"POST", "/v1/experiments/" + B_EXP + "/abort", a.token, ""},
      {"POST", "/v1/experiments", a.token, R"({"agent_id":)" + B_AGENT + R"(,"spec":)" + latency_spec() + "}"},
      {"DELETE", "/v1/tokens/" + std::to_string(b_api), a.token, ""},
      {"POST", "/v1/kill?agent_id=" + B_AGENT, a.token, ""},
      {"DELETE", "/v1/kill?agent_id=" + B_AGENT, a.token, ""},
      {"GET", "/v1/kill?agent_id=" + B_AGENT, a.token, ""},
      // B has a policy, A none: A sees no policy and its agent cannot report on B's.
      {"GET", "/v1/policy", a.token, ""},
      {"GET", "/v1/policy?version=1", a.token, ""},
      {"GET", "/v1/policy/export", a.token, ""},
      {"POST", "/v1/agents/" + B_AGENT + "/policy", a.agent_token, R"({"version":1,"status":"applied"})"},
      {"POST", "/v1/agents/" + std::to_string(a.agent_id) + "/policy", a.agent_token,
       R"({"version":1,"status":"applied"})"},
  };
  for (const auto& c : walk) {
    auto r = call(c.method, c.path, c.token, c.body);
    EXPECT_EQ(r.status, 404) << c.method << " " << c.path << " -> " << r.describe();
    EXPECT_EQ(r.body.find("bravo"), std::string::npos) << r.body;
  }
  EXPECT_FALSE(call("GET", "/v1/agents/" + std::to_string(a.agent_id) + "/next?wait_ms=0", a.agent_token)
                   .json()
                   .contains("policy"))
      << "A's agent was handed B's policy";
  // The lists and exports of A hold nothing of B.
  for (const std::string path : {"/v1/agents", "/v1/experiments", "/v1/tokens", "/v1/audit/export", "/v1/audit.csv"}) {
    auto r = call("GET", path, a.token);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body.find("bravo"), std::string::npos) << path << " shows B: " << r.body;
  }
  auto mine = call("GET", "/v1/experiments", a.token).json()["experiments"];
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0]["id"], a_exp);
  // A's kill switch is A's alone.
  EXPECT_EQ(call("POST", "/v1/kill", a.token).status, 200);
  EXPECT_EQ(state_of(b, b_exp), "queued") << "A's calls changed B's experiment";
  EXPECT_EQ(call("GET", "/v1/tokens", b.token).json()["tokens"].size(), 4u) << "B's API token was revoked";
  auto b_kill = call("GET", "/v1/kill", b.token).json();
  EXPECT_EQ(b_kill["engaged"], false);
  // And an agent's token is for its own agent's routes only.
  EXPECT_EQ(call("GET", "/v1/experiments", a.agent_token).status, 403);
}

TEST_P(ApiTest, AnAgentLongPollsForWorkAndReportsItThroughToTheEnd) {
  Tenant t = tenant("ops");
  const auto start = Clock::now();
  auto poll = std::async(std::launch::async, [&] { return call("GET", next_path(t), t.agent_token); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto created = Clock::now();
  const int64_t exp = experiment(t);
  CpReply got = poll.get();
  const auto latency = Clock::now() - created;
  ASSERT_EQ(got.status, 200) << got.describe();
  EXPECT_EQ(got.json()["experiment"]["id"], exp) << got.body;
  EXPECT_EQ(got.json()["experiment"]["status"], "dispatched");
  EXPECT_EQ(got.json()["experiment"]["spec"]["delay_ms"], 100);
  EXPECT_LT(latency, std::chrono::milliseconds(500)) << "the poll was not woken by the new experiment";
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
  // Claimed once: the next poll has nothing and waits out its time.
  const auto idle_start = Clock::now();
  auto idle = call("GET", next_path(t), t.agent_token);
  EXPECT_EQ(idle.status, 200);
  EXPECT_TRUE(idle.json()["experiment"].is_null()) << idle.body;
  EXPECT_GE(Clock::now() - idle_start, std::chrono::milliseconds(1400)) << "the long poll did not wait";

  EXPECT_EQ(event(t, exp, "completed", R"(,"detail":"too early")").status, 200)
      << "dispatched -> completed is allowed (a run that ended at once)";
  EXPECT_EQ(state_of(t, exp), "completed");
  const int64_t exp2 = experiment(t);
  ASSERT_EQ(call("GET", next_path(t, 0), t.agent_token).json()["experiment"]["id"], exp2);
  EXPECT_EQ(event(t, exp2, "progress").status, 409) << "progress before running";
  EXPECT_EQ(event(t, exp2, "running").status, 200);
  EXPECT_EQ(state_of(t, exp2), "running");
  EXPECT_EQ(event(t, exp2, "progress", R"(,"record":{"samples":3})").status, 200);
  auto done = event(t, exp2, "aborted-by-slo",
                    R"(,"detail":"p99 over 300 ms","record":{"verdict":"refuted","samples":[1,2,3]})");
  ASSERT_EQ(done.status, 200) << done.describe();
  auto shown = call("GET", "/v1/experiments/" + std::to_string(exp2), t.token).json();
  EXPECT_EQ(shown["status"], "aborted-by-slo");
  EXPECT_EQ(shown["detail"], "p99 over 300 ms");
  EXPECT_EQ(shown["record"]["verdict"], "refuted");
  EXPECT_EQ(event(t, exp2, "running").status, 409) << "a final state was left";
  auto agents = call("GET", "/v1/agents", t.token).json()["agents"];
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0]["features"]["tcx"], true);
  EXPECT_EQ(agents[0]["kernel"], "6.1.0");
}

// The kill switch: the agent's open poll is answered at once with the
// experiment to stop; nothing new starts until it is released.
TEST_P(ApiTest, TheKillSwitchWakesAgentsAndHoldsNewExperiments) {
  Tenant t = tenant("kill");
  const int64_t exp = experiment(t);
  ASSERT_EQ(call("GET", next_path(t, 0), t.agent_token).json()["experiment"]["id"], exp);
  ASSERT_EQ(event(t, exp, "running").status, 200);
  auto poll = std::async(std::launch::async, [&] { return call("GET", next_path(t), t.agent_token); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto killed = Clock::now();
  auto kill = call("POST", "/v1/kill", t.token);
  ASSERT_EQ(kill.status, 200) << kill.describe();
  CpReply woke = poll.get();
  EXPECT_LT(Clock::now() - killed, std::chrono::milliseconds(500)) << "the kill did not wake the poll";
  EXPECT_EQ(woke.json()["stop"], json::array({exp})) << woke.body;
  EXPECT_EQ(woke.json()["kill"], true);
  EXPECT_EQ(state_of(t, exp), "cancelled");
  auto refused = call("POST", "/v1/experiments", t.token,
                      R"({"agent_id":)" + std::to_string(t.agent_id) + R"(,"spec":)" + latency_spec() + "}");
  EXPECT_EQ(refused.status, 409) << refused.describe();
  // The agent's late "completed" confirms the stop; the state stays cancelled.
  auto confirm = event(t, exp, "completed", R"(,"record":{"verdict":"held"})");
  EXPECT_EQ(confirm.status, 200) << confirm.describe();
  EXPECT_EQ(state_of(t, exp), "cancelled");
  EXPECT_TRUE(call("GET", next_path(t, 0), t.agent_token).json()["stop"].empty());
  EXPECT_EQ(call("DELETE", "/v1/kill", t.token).status, 200);
  EXPECT_EQ(call("GET", "/v1/kill", t.token).json()["engaged"], false);
  const int64_t again = experiment(t);
  EXPECT_EQ(call("GET", next_path(t, 0), t.agent_token).json()["experiment"]["id"], again);
}

// A selector makes one experiment per matching agent of the workspace, all
// or none; another workspace's agents are never matched.
TEST_P(ApiTest, ASelectorStartsOneExperimentPerMatchingAgent) {
  Tenant t = tenant("sel");
  Tenant elsewhere = tenant("other");  // its agent is "other-host"
  auto enr = call("POST", "/v1/tokens", t.token, R"({"kind":"enrollment"})").json().value("token", "");
  const int64_t second = call("POST", "/v1/agents/register", enr, R"({"hostname":"sel-two"})").json()["agent_id"];
  const std::string spec = R"("spec":{"kind":"loss","target":"10.0.0.1","percent":10,"duration_sec":5})";
  auto all = call("POST", "/v1/experiments", t.token, R"({"selector":{"all":true},)" + spec + "}");
  ASSERT_EQ(all.status, 201) << all.describe();
  ASSERT_EQ(all.json()["experiments"].size(), 2u) << all.body;
  EXPECT_EQ(all.json()["experiments"][0]["agent_id"], t.agent_id);
  EXPECT_EQ(all.json()["experiments"][1]["agent_id"], second);
  auto named = call("POST", "/v1/experiments", t.token, R"({"selector":{"hostnames":["sel-two"]},)" + spec + "}");
  ASSERT_EQ(named.status, 201) << named.describe();
  ASSERT_EQ(named.json()["experiments"].size(), 1u);
  EXPECT_EQ(named.json()["experiments"][0]["agent_id"], second);
  auto foreign = call("POST", "/v1/experiments", t.token, R"({"selector":{"hostnames":["other-host"]},)" + spec + "}");
  EXPECT_EQ(foreign.status, 404) << "matched another workspace's agent: " << foreign.describe();
  EXPECT_EQ(call("GET", "/v1/experiments", t.token).json()["experiments"].size(), 3u);
  EXPECT_TRUE(call("GET", "/v1/experiments", elsewhere.token).json()["experiments"].empty());
  // An agent under its own kill switch refuses the whole selection.
  ASSERT_EQ(call("POST", "/v1/kill?agent_id=" + std::to_string(second), t.token).status, 200);
  auto held = call("POST", "/v1/experiments", t.token, R"({"selector":{"all":true},)" + spec + "}");
  EXPECT_EQ(held.status, 409) << held.describe();
  EXPECT_EQ(held.json().value("field", ""), "selector");
}

// One agent's kill switch: its experiments end and its poll wakes; another
// agent of the workspace goes on.
TEST_P(ApiTest, AnAgentsOwnKillSwitchStopsItAlone) {
  Tenant t = tenant("fleet");
  Tenant other = t;
  auto enr = call("POST", "/v1/tokens", t.token, R"({"kind":"enrollment"})").json().value("token", "");
  auto reg = call("POST", "/v1/agents/register", enr, R"({"hostname":"second"})").json();
  other.agent_id = reg.value("agent_id", int64_t{0});
  other.agent_token = reg.value("token", "");
  const int64_t mine = experiment(t);
  const int64_t theirs = experiment(other);
  ASSERT_EQ(call("GET", next_path(t, 0), t.agent_token).json()["experiment"]["id"], mine);
  auto poll = std::async(std::launch::async, [&] { return call("GET", next_path(t), t.agent_token); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto kill = call("POST", "/v1/kill?agent_id=" + std::to_string(t.agent_id), t.token);
  ASSERT_EQ(kill.status, 200) << kill.describe();
  auto woke = poll.get().json();
  EXPECT_EQ(woke["stop"], json::array({mine})) << woke;
  EXPECT_EQ(woke["kill"], true);
  EXPECT_EQ(event(t, mine, "stopped").status, 200);  // the agent confirms; stops come before new work
  EXPECT_EQ(state_of(t, theirs), "queued") << "the other agent's experiment was cancelled";
  EXPECT_EQ(call("GET", "/v1/kill", t.token).json()["engaged"], false) << "the workspace switch moved";
  EXPECT_EQ(call("GET", "/v1/kill?agent_id=" + std::to_string(t.agent_id), t.token).json()["agent_engaged"], true);
  auto refused = call("POST", "/v1/experiments", t.token,
                      R"({"agent_id":)" + std::to_string(t.agent_id) + R"(,"spec":)" + latency_spec() + "}");
  EXPECT_EQ(refused.status, 409) << refused.describe();
  EXPECT_EQ(refused.json().value("field", ""), "agent_id");
  EXPECT_EQ(call("GET", next_path(other, 0), other.agent_token).json()["experiment"]["id"], theirs);
  EXPECT_EQ(call("DELETE", "/v1/kill?agent_id=" + std::to_string(t.agent_id), t.token).status, 200);
  const int64_t again = experiment(t);
  EXPECT_EQ(call("GET", next_path(t, 0), t.agent_token).json()["experiment"]["id"], again);
  EXPECT_EQ(call("POST", "/v1/kill?agent_id=abc", t.token).status, 404);
}

TEST_P(ApiTest, AbortingADispatchedExperimentTellsItsAgent) {
  Tenant t = tenant("abort");
  const int64_t queued = experiment(t);
  EXPECT_EQ(call("POST", "/v1/experiments/" + std::to_string(queued) + "/abort", t.token).status, 200);
  EXPECT_EQ(state_of(t, queued), "cancelled");
  EXPECT_EQ(call("POST", "/v1/experiments/" + std::to_string(queued) + "/abort", t.token).status, 409);
  EXPECT_TRUE(call("GET", next_path(t, 0), t.agent_token).json()["experiment"].is_null()) << "a cancelled one ran";
  const int64_t exp = experiment(t);
  ASSERT_EQ(call("GET", next_path(t, 0), t.agent_token).json()["experiment"]["id"], exp);
  auto poll = std::async(std::launch::async, [&] { return call("GET", next_path(t), t.agent_token); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(call("POST", "/v1/experiments/" + std::to_string(exp) + "/abort", t.token).status, 200);
  EXPECT_EQ(poll.get().json()["stop"], json::array({exp}));
  EXPECT_EQ(event(t, exp, "running").status, 409) << "a cancelled experiment started";
  EXPECT_EQ(event(t, exp, "stopped").status, 200);
}

TEST_P(ApiTest, ALeaseThatRunsOutFailsTheExperimentForGood) {
  auto config = fltest::test_config();
  config.lease = std::chrono::milliseconds(400);
  start(config);
  Tenant t = tenant("lease");
  const int64_t exp = experiment(t);
  ASSERT_EQ(call("GET", next_path(t, 0), t.agent_token).json()["experiment"]["id"], exp);
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  EXPECT_EQ(state_of(t, exp), "failed");
  EXPECT_TRUE(call("GET", next_path(t, 0), t.agent_token).json()["experiment"].is_null()) << "dispatched twice";
  EXPECT_EQ(event(t, exp, "running").status, 409);
}

TEST_P(ApiTest, TheAuditTrailChainsEveryActionAndVerifyNamesAnEditedRow) {
  Tenant t = tenant("audit");
  const int64_t exp = experiment(t);
  ASSERT_EQ(call("GET", next_path(t, 0), t.agent_token).json()["experiment"]["id"], exp);
  ASSERT_EQ(event(t, exp, "running").status, 200);
  ASSERT_EQ(call("POST", "/v1/kill", t.token).status, 200);
  auto bundle = call("GET", "/v1/audit/export", t.token).json();
  std::vector<std::string> actions;
  for (const auto& e : bundle["entries"]) actions.push_back(e["action"]);
  EXPECT_EQ(actions, (std::vector<std::string>{"auth.signup", "token.create", "agent.register", "experiment.create",
                                               "experiment.dispatch", "agent.event.running", "kill.engage"}));
  EXPECT_EQ(bundle["entries"].back()["object"], "workspace:" + std::to_string(t.workspace_id));
  EXPECT_EQ(bundle["head"], bundle["entries"].back()["hash"]);
  auto ok = call("POST", "/v1/audit/verify", t.token);
  EXPECT_EQ(ok.json()["ok"], true) << ok.body;
  EXPECT_EQ(call("POST", "/v1/audit/verify", t.token, json{{"bundle", bundle}}.dump()).json()["ok"], true);
  auto csv = call("GET", "/v1/audit.csv", t.token);
  EXPECT_EQ(csv.body.rfind("seq,at_ms,actor,action,object,detail,prev_hash,hash\r\n", 0), 0u);
  EXPECT_EQ(std::count(csv.body.begin(), csv.body.end(), '\n'), 8);

  // Someone with database access rewrites what the agent did.
  const int64_t edited = bundle["entries"][5]["seq"];
  auto db = faultline::cp::open_database(server_->database_url());
  ASSERT_TRUE(db.ok()) << db.error().describe();
  ASSERT_TRUE((*db)->query("UPDATE audit SET action = 'agent.event.completed' WHERE seq = $1", {edited}).ok());
  auto bad = call("POST", "/v1/audit/verify", t.token).json();
  EXPECT_EQ(bad["ok"], false);
  EXPECT_EQ(bad["bad_seq"], edited) << bad;
  // An exported bundle edited, or cut short, fails on its own too.
  auto cut = bundle;
  cut["entries"].erase(cut["entries"].size() - 1);
  EXPECT_EQ(call("POST", "/v1/audit/verify", t.token, json{{"bundle", cut}}.dump()).json()["ok"], false);
  auto forged = bundle;
  forged["entries"][2]["detail"] = "{}";
  auto forged_check = call("POST", "/v1/audit/verify", t.token, json{{"bundle", forged}}.dump()).json();
  EXPECT_EQ(forged_check["bad_seq"], bundle["entries"][2]["seq"]) << forged_check;
}

// An action whose activity-log entry cannot be written does not happen: the
// database is made to refuse audit rows, and the experiment is not stored.
TEST_P(ApiTest, AnActionThatCannotBeAuditedIsUndone) {
  Tenant t = tenant("atomic");
  auto db = faultline::cp::open_database(server_->database_url());
  ASSERT_TRUE(db.ok()) << db.error().describe();
  const bool sqlite = GetParam() == Backend::Sqlite;
  auto refuse = (*db)->exec_script(
      sqlite ? "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'audit refused'); END;"
             : "CREATE FUNCTION refuse_audit() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$ "
               "LANGUAGE plpgsql; CREATE TRIGGER refuse_audit BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION "
               "refuse_audit();");
  ASSERT_TRUE(refuse.ok()) << refuse.error().describe();
  auto r = call("POST", "/v1/experiments", t.token,
                R"({"agent_id":)" + std::to_string(t.agent_id) + R"(,"spec":)" + latency_spec() + "}");
  EXPECT_EQ(r.status, 500) << r.describe();
  EXPECT_EQ(call("POST", "/v1/kill", t.token).status, 500);
  ASSERT_TRUE((*db)->exec_script(sqlite ? "DROP TRIGGER refuse_audit;" : "DROP TRIGGER refuse_audit ON audit;").ok());
  EXPECT_TRUE(call("GET", "/v1/experiments", t.token).json()["experiments"].empty())
      << "stored without its audit entry";
  EXPECT_EQ(call("GET", "/v1/kill", t.token).json()["engaged"], false) << "engaged without its audit entry";
  auto m = call("GET", "/metrics", t.token).body;
  EXPECT_NE(m.find("faultcp_audit_append_failures_total 2\n"), std::string::npos) << m;
  EXPECT_EQ(call("POST", "/v1/audit/verify", t.token).json()["ok"], true);
}

// Bad input on the routes that take a body or a token: a 4xx whose JSON names
// the field, and nothing stored (no experiment, no audit entry).
TEST_P(ApiTest, BadInputIsRefusedNamingTheFieldAndNothingIsStored) {
  Tenant t = tenant("strict");
  const std::string agent = std::to_string(t.agent_id);
  auto spec_with = [&](const std::string& fields) {
    return R"({"agent_id":)" + agent + R"(,"spec":{"kind":"latency","target":"10.0.0.1","duration_sec":30,)" + fields +
           "}}";
  };
  const size_t audit_before = call("GET", "/v1/audit/export", t.token).json()["entries"].size();
  struct Case {
    std::string what, method, path, body;
    int status;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"malformed JSON", "POST", "/v1/experiments", R"({"agent_id":)", 400, "body"},
      {"not an object", "POST", "/v1/experiments", "[1,2]", 400, "body"},
      // Both found by cp_body_fuzz: a number out of range was a 500, an empty
      // member name an error naming no field.
      {"number out of range", "POST", "/v1/experiments", R"({"agent_id":1e999,"spec":{}})", 400, "body"},
      {"empty member name", "POST", "/v1/experiments", R"({"":1,"agent_id":1,"spec":{}})", 400, "\"\""},
      {"empty body", "POST", "/v1/experiments", "", 400, "body"},
      {"wrong type", "POST", "/v1/experiments", R"({"agent_id":"1","spec":{}})", 400, "agent_id"},
      {"unknown field", "POST", "/v1/experiments", R"({"agent_id":1,"spec":{},"agents":"all"})", 400, "agents"},
      {"agent and selector", "POST", "/v1/experiments",
       R"({"agent_id":)" + agent +
           R"(,"selector":{"all":true},"spec":{"kind":"loss","target":"10.0.0.1","duration_sec":3}})",
       400, "agent_id"},
      {"selector field", "POST", "/v1/experiments",
       R"({"selector":{"labels":["x"]},"spec":{"kind":"loss","target":"10.0.0.1","duration_sec":3}})", 400,
       "selector.labels"},
      {"selector hostname type", "POST", "/v1/experiments",
       R"({"selector":{"hostnames":["strict-host",7]},"spec":{"kind":"loss","target":"10.0.0.1","duration_sec":3}})",
       400, "selector.hostnames[1]"},
      {"selector unknown host", "POST", "/v1/experiments",
       R"({"selector":{"hostnames":["strict-host","nohost"]},"spec":{"kind":"loss","target":"10.0.0.1","duration_sec":3}})",
       404, "selector.hostnames[1]"},
      {"missing spec", "POST", "/v1/experiments", R"({"agent_id":1})", 400, "spec"},
      {"unknown spec field", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"bogus":1)"), 400, "spec.bogus"},
      {"delay cap", "POST", "/v1/experiments", spec_with(R"("delay_ms":60001)"), 400, "spec.delay_ms"},
      {"jitter cap", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"jitter_ms":10001)"), 400, "spec.jitter_ms"},
      {"percent", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"percent":101)"), 400, "spec.percent"},
      {"duration cap", "POST", "/v1/experiments",
       R"({"agent_id":)" + agent + R"(,"spec":{"kind":"loss","target":"10.0.0.1","duration_sec":3601}})", 400,
       "spec.duration_sec"},
      {"kind", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"kind":"meteor")"), 400, "spec.kind"},
      {"target", "POST", "/v1/experiments",
       R"({"agent_id":)" + agent + R"(,"spec":{"kind":"loss","target":"10.0.0.300","duration_sec":3}})", 400,
       "spec.target"},
      {"guardrail half", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"query":"up")"), 400,
       "spec.prometheus_url"},
      {"health url", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"health_url":"ftp://x")"), 400,
       "spec.health_url"},
      {"kernel signal", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"kernel_signal":"tcp_loss")"), 400,
       "spec.kernel_signal"},
      {"grace on a packet fault", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"grace_sec":5)"), 400,
       "spec.grace_sec"},
      {"interval cap", "POST", "/v1/experiments",
       spec_with(R"("delay_ms":5,"health_url":"http://127.0.0.1/","interval":"11m")"), 400, "spec.interval"},
      {"interval cap, the deprecated number", "POST", "/v1/experiments",
       spec_with(R"("delay_ms":5,"health_url":"http://127.0.0.1/","interval_sec":601)"), 400, "spec.interval_sec"},
      {"hypothesis without a signal", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"hypothesis":"p99 holds")"),
       400, "spec.hypothesis"},
      {"steady state without a hypothesis", "POST", "/v1/experiments",
       spec_with(R"("delay_ms":5,"health_url":"http://127.0.0.1/","steady_state":"5s")"), 400, "spec.steady_state"},
      {"netns", "POST", "/v1/experiments", spec_with(R"("delay_ms":5,"netns":"../x")"), 400, "spec.netns"},
      {"event type", "POST", "/v1/agents/" + agent + "/events", R"({"experiment_id":1,"type":"exploded"})", 400,
       "type"},
      {"event field type", "POST", "/v1/agents/" + agent + "/events", R"({"experiment_id":1.5,"type":"running"})", 400,
       "experiment_id"},
      {"token kind", "POST", "/v1/tokens", R"({"kind":"session"})", 400, "kind"},
      {"oversize body", "POST", "/v1/experiments", std::string(70 * 1024, ' '), 413, ""},
  };
  for (const auto& c : cases) {
    const std::string& token = c.path.find("/events") != std::string::npos ? t.agent_token : t.token;
    auto r = call(c.method, c.path, token, c.body);
    EXPECT_EQ(r.status, c.status) << c.what << ": " << r.describe();
    EXPECT_EQ(r.json().value("status", 0), c.status) << c.what << ": not the JSON error envelope: " << r.body;
    if (!c.field.empty()) {
      EXPECT_EQ(r.json().value("field", ""), c.field) << c.what << ": " << r.body;
    }
  }
  EXPECT_TRUE(call("GET", "/v1/experiments", t.token).json()["experiments"].empty())
      << "a refused experiment was stored";
  EXPECT_EQ(call("GET", "/v1/audit/export", t.token).json()["entries"].size(), audit_before);
  EXPECT_EQ(call("GET", "/v1/tokens", t.token).json()["tokens"].size(), 3u);
  // Bad tokens on every kind of route.
  for (const std::string& bad : {std::string(""), std::string("flcp_sess_nope"), t.token + "x"}) {
    auto r = call("GET", "/v1/experiments", bad);
    EXPECT_EQ(r.status, 401) << r.describe();
    EXPECT_EQ(r.json().value("field", ""), "authorization");
  }
  EXPECT_EQ(call("POST", "/v1/agents/register", t.token, R"({"hostname":"h"})").status, 403)
      << "a session token enrolled an agent";
}

// Every field of every family, and every shared guardrail field, given a bad
// value: faultcp's answer is the very error the typed experiment's reader
// gives (the one faultd's agent runs a spec with), and it names a field.
TEST_P(ApiTest, EveryFieldIsRefusedByFaultcpAsFaultdsReaderRefusesIt) {
  Tenant t = tenant("doors");
  struct Family {
    nlohmann::json base;  // a good spec of the family
    std::vector<std::string> fields;
  };
  auto names = [](std::span<const faultline::ExperimentField> table) {
    std::vector<std::string> out;
    for (const auto& f : table) out.emplace_back(f.field);
    return out;
  };
  const std::vector<std::string> packet = names(packet_experiment_fields());
  const std::vector<Family> families = {
      {{{"kind", "loss"}, {"target", "10.0.0.1"}, {"percent", 10}, {"duration_sec", 30}}, packet},
      {{{"kind", "latency"}, {"target", "10.0.0.1"}, {"delay_ms", 10}, {"duration_sec", 30}}, packet},
      {{{"kind", "syscall"}, {"syscall", "connect"}, {"errno", "EIO"}, {"cgroup", "x"}, {"duration_sec", 30}},
       names(syscall_experiment_fields())},
      {{{"kind", "cpu"}, {"cores", 1}, {"duration_sec", 30}}, names(resource_experiment_fields())},
      {{{"kind", "memory"}, {"size", "64MiB"}, {"duration_sec", 5}}, names(resource_experiment_fields())},
      {{{"kind", "process"}, {"pid", 4242}, {"action", "kill"}, {"duration_sec", 5}},
       names(resource_experiment_fields())},
      {{{"kind", "disk"}, {"path", "/var/tmp"}, {"fill", 90}, {"duration_sec", 5}},
       names(resource_experiment_fields())},
      {{{"kind", "tcp"}, {"target", "10.0.0.5:5432"}, {"toxic", {"noop"}}, {"duration_sec", 5}},
       names(tcp_experiment_fields())},
      {{{"kind", "http"}, {"target", "10.0.0.9:80"}, {"status", 503}, {"duration_sec", 60}},
       names(http_experiment_fields())},
  };
  std::vector<std::string> shared = {"kind", "duration_sec"};
  for (const auto& f : guardrail_fields()) shared.emplace_back(f.field);
  const std::vector<nlohmann::json> bad_values = {nlohmann::json::object(), -1, 1e12, "", nlohmann::json::array()};
  size_t checked = 0;
  for (const auto& fam : families) {
    ASSERT_TRUE(experiment_from_json(fam.base, "")) << fam.base.dump();
    std::vector<std::string> fields = fam.fields;
    fields.insert(fields.end(), shared.begin(), shared.end());
    for (const auto& field : fields) {
      for (const auto& value : bad_values) {
        nlohmann::json spec = fam.base;
        // A guardrail field is judged beside the signal it belongs to.
        if (field != "health_url" && is_guardrail_field(field)) spec["health_url"] = "http://127.0.0.1:9/health";
        spec[field] = value;
        auto read = experiment_from_json(spec, "");
        if (read) continue;  // a value this field takes (a string for a text field)
        auto r =
            call("POST", "/v1/experiments", t.token, nlohmann::json{{"agent_id", t.agent_id}, {"spec", spec}}.dump());
        ASSERT_EQ(r.status, 400) << spec.dump() << " " << r.describe();
        EXPECT_EQ(r.json().value("error", ""), read.error().message) << spec.dump();
        EXPECT_EQ(r.json().value("error", "").rfind("spec", 0), 0U) << r.describe();
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 200U);
  std::cout << "every door: " << checked << " bad values refused alike by faultcp and faultd's reader\n";
  auto list = call("GET", "/v1/experiments", t.token);
  EXPECT_TRUE(list.json()["experiments"].empty()) << list.describe();
}

// Syscall, resource, tcp and http experiments (issue 14, section 3): the `faultctl run`
// flags in snake_case, each cap of the CLI refused naming the field (the
// checks are the CLI's own, userspace/faults/*/spec_check.h and validate()),
// nothing stored; good specs of each kind are taken.
TEST_P(ApiTest, SyscallAndResourceSpecsAreCheckedPerKind) {
  Tenant t = tenant("kinds");
  const std::string agent = std::to_string(t.agent_id);
  auto post = [&](const std::string& spec) {
    return call("POST", "/v1/experiments", t.token, R"({"agent_id":)" + agent + R"(,"spec":)" + spec + "}");
  };
  const std::string sc = R"({"kind":"syscall","syscall":"connect","errno":"ECONNREFUSED","duration_sec":30,)";
  const std::string cpu = R"({"kind":"cpu","cores":1,"duration_sec":30,)";
  struct Case {
    std::string what, spec, field;
  };
  const std::vector<Case> cases = {
      // syscall
      {"syscall required", R"({"kind":"syscall","errno":"EIO","duration_sec":3,"cgroup":"x"})", "spec.syscall"},
      {"no such syscall", sc + R"("cgroup":"x","syscall":"connect,nosuchcall"})", "spec.syscall"},
      {"a syscall that does not return", sc + R"("cgroup":"x","syscall":"exit_group"})", "spec.syscall"},
      {"errno name", sc + R"("cgroup":"x","errno":"EWHAT"})", "spec.errno"},
      {"errno type", sc + R"("cgroup":"x","errno":5})", "spec.errno"},
      {"percent", sc + R"("cgroup":"x","percent":100.5})", "spec.percent"},
      {"syscall duration cap", sc + R"("cgroup":"x","duration_sec":3601})", "spec.duration_sec"},
      {"no scope", sc + R"("percent":50})", "spec.cgroup"},
      {"two scopes", sc + R"("cgroup":"x","pid":4242})", "spec.pid"},
      {"pid 1", sc + R"("pid":1})", "spec.pid"},
      {"empty cgroup", sc + R"("cgroup":""})", "spec.cgroup"},
      {"via", sc + R"("cgroup":"x","via":"kprobe"})", "spec.via"},
      {"via seccomp needs a command", sc + R"("cgroup":"x","via":"seccomp"})", "spec.via"},
      {"after cap", sc + R"("cgroup":"x","after":1000000001})", "spec.after"},
      {"max injections cap", sc + R"("cgroup":"x","max_injections":0})", "spec.max_injections"},
      {"start after the end", sc + R"("cgroup":"x","start_after_ms":30000})", "spec.start_after_ms"},
      {"a command", sc + R"("cgroup":"x","command":["curl"]})", "spec.command"},
      {"a packet field", sc + R"("cgroup":"x","target":"10.0.0.1"})", "spec.target"},
      {"a guardrail on a syscall fault", sc + R"("cgroup":"x","query":"up"})", "spec.prometheus_url"},
      // resource
      {"cores cap", cpu + R"("cores":4097})", "spec.cores"},
      {"no cores", cpu + R"("cores":0})", "spec.cores"},
      {"load", cpu + R"("load":150})", "spec.load"},
      {"resource duration floor", cpu + R"("duration_sec":0})", "spec.duration_sec"},
      {"a field of another kind", cpu + R"("size":"1GiB"})", "spec.size"},
      {"memory size", R"({"kind":"memory","size":"12 parsecs","duration_sec":5})", "spec.size"},
      {"memory floor", R"({"kind":"memory","size":"1KiB","duration_sec":5})", "spec.size"},
      {"memory size required", R"({"kind":"memory","duration_sec":5})", "spec.size"},
      {"process action", R"({"kind":"process","pid":4242,"action":"stop","duration_sec":5})", "spec.action"},
      {"process signal with freeze",
       R"({"kind":"process","pid":4242,"action":"freeze","signal":"TERM","duration_sec":5})", "spec.signal"},
      {"process pid cap", R"({"kind":"process","pid":4194305,"action":"kill","duration_sec":5})", "spec.pid"},
      {"process one target", R"({"kind":"process","pid":4242,"name":"nginx","action":"kill","duration_sec":5})",
       "spec.pid"},
      {"disk fill", R"({"kind":"disk","path":"/var/tmp","fill":100,"duration_sec":5})", "spec.fill"},
      {"disk fill or size", R"({"kind":"disk","path":"/var/tmp","duration_sec":5})", "spec.fill"},
      {"disk min free", R"({"kind":"disk","path":"/var/tmp","fill":90,"min_free":"1KiB","duration_sec":5})",
       "spec.min_free"},
      {"hypothesis without a signal", cpu + R"("hypothesis":"p99 holds"})", "spec.hypothesis"},
      // tcp
      {"tcp target", R"({"kind":"tcp","target":"10.0.0.5","toxic":["latency=1s"],"duration_sec":5})", "spec.target"},
      {"tcp target name", R"({"kind":"tcp","target":"db.internal:5432","toxic":["noop"],"duration_sec":5})",
       "spec.target"},
      {"tcp toxic required", R"({"kind":"tcp","target":"10.0.0.5:5432","duration_sec":5})", "spec.toxic"},
      {"tcp toxic", R"({"kind":"tcp","target":"10.0.0.5:5432","toxic":["latency=fast"],"duration_sec":5})",
       "spec.toxic"},
      {"tcp toxic type", R"({"kind":"tcp","target":"10.0.0.5:5432","toxic":["noop",7],"duration_sec":5})",
       "spec.toxic[1]"},
      {"tcp toxics cap",
       R"({"kind":"tcp","target":"10.0.0.5:5432","toxic":["noop","noop","noop","noop","noop","noop","noop","noop",)"
       R"("noop","noop","noop","noop","noop","noop","noop","noop","noop"],"duration_sec":5})",
       "spec.toxic"},
      {"tcp toxicity", R"({"kind":"tcp","target":"10.0.0.5:5432","toxic":["noop"],"toxicity":1.5,"duration_sec":5})",
       "spec.toxicity"},
      {"tcp direction", R"({"kind":"tcp","target":"10.0.0.5:5432","toxic":["noop"],"direction":"up","duration_sec":5})",
       "spec.direction"},
      {"tcp drain cap",
       R"({"kind":"tcp","target":"10.0.0.5:5432","toxic":["noop"],"drain_ms":600001,"duration_sec":5})",
       "spec.drain_ms"},
      {"tcp duration cap", R"({"kind":"tcp","target":"10.0.0.5:5432","toxic":["noop"],"duration_sec":3601})",
       "spec.duration_sec"},
      // http
      {"http target name", R"({"kind":"http","target":"api.internal:8080","status":503,"duration_sec":5})",
       "spec.target"},
      {"http one fault", R"({"kind":"http","target":"10.0.0.5:8080","duration_sec":5})", "spec.status"},
      {"http two faults", R"({"kind":"http","target":"10.0.0.5:8080","status":503,"reset":true,"duration_sec":5})",
       "spec.status"},
      {"http status range", R"({"kind":"http","target":"10.0.0.5:8080","status":42,"duration_sec":5})", "spec.status"},
      {"http status type", R"({"kind":"http","target":"10.0.0.5:8080","status":"503","duration_sec":5})",
       "spec.status"},
      {"http delay cap", R"({"kind":"http","target":"10.0.0.5:8080","delay_ms":60001,"duration_sec":5})",
       "spec.delay_ms"},
      {"http delay_at", R"({"kind":"http","target":"10.0.0.5:8080","delay_ms":10,"delay_at":"later","duration_sec":5})",
       "spec.delay_at"},
      {"http body without status",
       R"({"kind":"http","target":"10.0.0.5:8080","reset":true,"body":"x","duration_sec":5})", "spec.body"},
      {"http llm preset", R"({"kind":"http","target":"10.0.0.5:8080","llm":"sleepy","duration_sec":5})", "spec.llm"},
      {"http percent", R"({"kind":"http","target":"10.0.0.5:8080","status":503,"percent":101,"duration_sec":5})",
       "spec.percent"},
      {"http attempts", R"({"kind":"http","target":"10.0.0.5:8080","status":503,"attempts":0,"duration_sec":5})",
       "spec.attempts"},
      {"http header",
       R"({"kind":"http","target":"10.0.0.5:8080","status":503,"header_equals":["X Tenant=blue"],)"
       R"("duration_sec":5})",
       "spec.header_equals"},
      {"http header type",
       R"({"kind":"http","target":"10.0.0.5:8080","status":503,"header_contains":"a=b",)"
       R"("duration_sec":5})",
       "spec.header_contains"},
      {"http status on tls", R"({"kind":"http","target":"10.0.0.5:443","status":503,"duration_sec":5})", "spec.status"},
      {"http path on declared tls",
       R"({"kind":"http","target":"10.0.0.5:8443","tls":true,"delay_ms":5,"path":"/x","duration_sec":5})", "spec.path"},
      {"http tls and termination",
       R"({"kind":"http","target":"10.0.0.5:443","tls":true,"terminate_tls":true,"reset":true,"duration_sec":5})",
       "spec.tls"},
      {"http upstream ca without termination",
       R"({"kind":"http","target":"10.0.0.5:8080","reset":true,"upstream_ca":"/etc/ca.pem","duration_sec":5})",
       "spec.upstream_ca"},
      {"http drain cap", R"({"kind":"http","target":"10.0.0.5:8080","reset":true,"drain_ms":600001,"duration_sec":5})",
       "spec.drain_ms"},
      {"http duration cap", R"({"kind":"http","target":"10.0.0.5:8080","reset":true,"duration_sec":3601})",
       "spec.duration_sec"},
      {"http a command", R"({"kind":"http","target":"10.0.0.5:8080","reset":true,"command":["curl"],"duration_sec":5})",
       "spec.command"},
      {"http a tcp field", R"({"kind":"http","target":"10.0.0.5:8080","reset":true,"toxic":["noop"],"duration_sec":5})",
       "spec.toxic"},
      {"not a kind", R"({"kind":"grpc","duration_sec":5})", "spec.kind"},
  };
  for (const auto& c : cases) {
    auto r = post(c.spec);
    EXPECT_EQ(r.status, 400) << c.what << ": " << r.describe();
    EXPECT_EQ(r.json().value("field", ""), c.field) << c.what << ": " << r.body;
  }
  EXPECT_TRUE(call("GET", "/v1/experiments", t.token).json()["experiments"].empty())
      << "a refused experiment was stored";
  for (const std::string& good :
       {sc + R"("cgroup":"app","percent":30,"via":"cgroup","after":2,"max_injections":5,"start_after_ms":500})",
        sc + R"("pid":4242,"health_url":"http://127.0.0.1:8080/","hypothesis":"retries hold"})",
        cpu + R"("load":50,"cgroup":"app"})", std::string(R"({"kind":"memory","size":"64MiB","duration_sec":5})"),
        std::string(R"({"kind":"process","name":"nginx","action":"kill","signal":"TERM","duration_sec":5})"),
        std::string(R"({"kind":"disk","path":"/var/tmp","size":"10MB","min_free":"1GiB","duration_sec":5})"),
        std::string(R"({"kind":"tcp","target":"10.0.0.5:5432","toxic":["latency=200ms,jitter=20ms","reset_peer=1s"],)"
                    R"("direction":"upstream","toxicity":0.3,"cgroup":"app","drain_ms":1000,"duration_sec":60})"),
        std::string(R"({"kind":"http","target":"10.0.0.5:8080","method":"POST","path":"/payments","status":503,)"
                    R"("body":"down","content_type":"text/plain","percent":30,"attempts":2,)"
                    R"("header_equals":["X-Tenant=blue"],"header_contains":["User-Agent=curl"],"cgroup":"app",)"
                    R"("drain_ms":1000,"duration_sec":60})"),
        std::string(R"({"kind":"http","target":"10.0.0.0/24:443","host":"api.example.com","delay_ms":2000,)"
                    R"("duration_sec":60})"),
        std::string(R"({"kind":"http","target":"10.0.0.9:8443","terminate_tls":true,)"
                    R"("upstream_ca":"/etc/pki/internal-root.pem","llm":"rate-limit","llm_provider":"anthropic",)"
                    R"("retry_after":3,"duration_sec":60})")}) {
    auto r = post(good);
    EXPECT_EQ(r.status, 201) << good << ": " << r.describe();
  }
  EXPECT_EQ(call("GET", "/v1/experiments", t.token).json()["experiments"].size(), 10u);
}

TEST_P(ApiTest, HealthzIsOpenAndMetricsSpeakPrometheus) {
  auto h = call("GET", "/healthz");
  EXPECT_EQ(h.status, 200) << h.describe();
  EXPECT_EQ(h.json()["status"], "ok");
  EXPECT_EQ(call("GET", "/metrics").status, 401);
  Tenant t = tenant("metrics");
  (void)experiment(t);
  auto m = call("GET", "/metrics", t.token);
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.head.find("text/plain; version=0.0.4"), std::string::npos) << m.head;
  EXPECT_NE(m.body.find("faultcp_experiments{state=\"queued\"} 1\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("faultcp_agents 1\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("# TYPE faultcp_http_responses_total counter\n"), std::string::npos) << m.body;
}

// The agent routes in protobuf (cp/proto/agent.proto), as faultd speaks them:
// register, the long poll and the events, each answered in protobuf when asked.
TEST_P(ApiTest, AgentRoutesSpeakProtobuf) {
  Tenant t = tenant("proto", false);
  auto enr = call("POST", "/v1/tokens", t.token, R"({"kind":"enrollment","name":"fleet"})");
  ASSERT_EQ(enr.status, 201) << enr.describe();
  const std::vector<std::pair<std::string, std::string>> proto = {{"Content-Type", "application/x-protobuf"},
                                                                  {"Accept", "application/x-protobuf"}};
  faultline::cp::RegisterRequest req;
  req.set_hostname("pb-host");
  req.set_kernel("6.1.0");
  req.set_features_json(R"({"tcx":true})");
  auto reg = fltest::cp_request(server_->port(), "POST", "/v1/agents/register", enr.json().value("token", ""),
                                req.SerializeAsString(), 10'000, proto);
  ASSERT_EQ(reg.status, 201) << reg.describe();
  EXPECT_NE(reg.head.find("application/x-protobuf"), std::string::npos) << reg.head;
  faultline::cp::RegisterReply answer;
  ASSERT_TRUE(answer.ParseFromString(reg.body));
  t.agent_id = answer.agent_id();
  t.agent_token = answer.token();
  ASSERT_GT(t.agent_id, 0);
  auto agent = call("GET", "/v1/agents/" + std::to_string(t.agent_id), t.token).json();
  EXPECT_EQ(agent.value("hostname", ""), "pb-host") << agent.dump();
  EXPECT_EQ(agent.value("kernel", ""), "6.1.0") << agent.dump();

  const int64_t exp = experiment(t);
  auto next = fltest::cp_request(server_->port(), "GET", next_path(t, 0), t.agent_token, "", 10'000, {proto.back()});
  ASSERT_EQ(next.status, 200) << next.describe();
  faultline::cp::NextReply work;
  ASSERT_TRUE(work.ParseFromString(next.body)) << next.describe();
  ASSERT_TRUE(work.has_experiment());
  EXPECT_EQ(work.experiment().id(), exp);
  EXPECT_TRUE(work.experiment().has_lease_until_ms());
  EXPECT_FALSE(work.kill());
  EXPECT_EQ(json::parse(work.experiment().spec_json()), json::parse(latency_spec()));

  const std::string events = "/v1/agents/" + std::to_string(t.agent_id) + "/events";
  faultline::cp::Event running;
  running.set_experiment_id(exp);
  running.set_type("running");
  auto r =
      fltest::cp_request(server_->port(), "POST", events, t.agent_token, running.SerializeAsString(), 10'000, proto);
  ASSERT_EQ(r.status, 200) << r.describe();
  faultline::cp::EventReply state;
  ASSERT_TRUE(state.ParseFromString(r.body));
  EXPECT_EQ(state.status(), "running");
  faultline::cp::Event done;
  done.set_experiment_id(exp);
  done.set_type("completed");
  done.set_record_json(R"({"verdict":"held"})");
  r = fltest::cp_request(server_->port(), "POST", events, t.agent_token, done.SerializeAsString(), 10'000,
                         {proto.front()});  // no Accept: the answer is JSON
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json().value("status", ""), "completed") << r.body;
  auto stored = call("GET", "/v1/experiments/" + std::to_string(exp), t.token).json();
  EXPECT_EQ(stored["record"], json({{"verdict", "held"}})) << stored.dump();

  // An idle poll, held and answered in protobuf.
  auto idle = fltest::cp_request(server_->port(), "GET", next_path(t, 200), t.agent_token, "", 10'000, {proto.back()});
  ASSERT_EQ(idle.status, 200) << idle.describe();
  faultline::cp::NextReply none;
  ASSERT_TRUE(none.ParseFromString(idle.body));
  EXPECT_FALSE(none.has_experiment());
}

// Every malformed protobuf body is a 400 JSON error naming what is wrong, and
// nothing is stored; the JSON form of the same routes still works.
TEST_P(ApiTest, MalformedProtobufBodiesAreRefusedByName) {
  Tenant t = tenant("badproto");
  auto enr = call("POST", "/v1/tokens", t.token, R"({"kind":"enrollment","name":"more"})");
  ASSERT_EQ(enr.status, 201) << enr.describe();
  const std::string enroll = enr.json().value("token", "");
  const int64_t exp = experiment(t);
  const std::string events = "/v1/agents/" + std::to_string(t.agent_id) + "/events";
  const auto audit_before = call("GET", "/v1/audit/export", t.token).json()["entries"].size();

  faultline::cp::RegisterRequest good;
  good.set_hostname("h");
  good.set_features_json(R"({"a":1})");
  const std::string whole = good.SerializeAsString();
  faultline::cp::RegisterRequest not_json = good;
  not_json.set_features_json("[1,2]");
  faultline::cp::Event ev;
  ev.set_experiment_id(exp);
  ev.set_type("running");
  faultline::cp::Event no_id;
  no_id.set_type("running");
  faultline::cp::Event bad_type = ev;
  bad_type.set_type("exploded");
  struct Case {
    const char* what;
    std::string path;
    std::string token;
    std::string body;
    int status;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"truncated", "/v1/agents/register", enroll, whole.substr(0, whole.size() - 3), 400, "features_json"},
      {"truncated tag", "/v1/agents/register", enroll, std::string("\x80", 1), 400, "body"},
      {"wrong wire type", "/v1/agents/register", enroll, std::string("\x08\x01", 2), 400, "hostname"},
      {"unknown field", "/v1/agents/register", enroll, whole + std::string("\x78\x01", 2), 400, "body"},
      {"features not an object", "/v1/agents/register", enroll, not_json.SerializeAsString(), 400, "features_json"},
      {"not UTF-8", "/v1/agents/register", enroll, std::string("\x0a\x01h\x12\x02\xff\xfe", 7), 400, "kernel"},
      {"empty register", "/v1/agents/register", enroll, "", 400, "hostname"},
      {"event id as a string", "/v1/agents/" + std::to_string(t.agent_id) + "/events", t.agent_token,
       std::string("\x0a\x01\x31", 3) + std::string("\x12\x07running", 9), 400, "experiment_id"},
      {"event without an id", events, t.agent_token, no_id.SerializeAsString(), 400, "experiment_id"},
      {"event type", events, t.agent_token, bad_type.SerializeAsString(), 400, "type"},
      {"record not JSON", events, t.agent_token, ev.SerializeAsString() + std::string("\x22\x01{", 3), 400,
       "record_json"},
      {"oversize", "/v1/agents/register", enroll, std::string(70 * 1024, '\x0a'), 413, ""},
  };
  const std::vector<std::pair<std::string, std::string>> proto = {{"Content-Type", "application/x-protobuf"},
                                                                  {"Accept", "application/x-protobuf"}};
  for (const auto& c : cases) {
    auto r = fltest::cp_request(server_->port(), "POST", c.path, c.token, c.body, 10'000, proto);
    EXPECT_EQ(r.status, c.status) << c.what << ": " << r.describe();
    EXPECT_EQ(r.json().value("status", 0), c.status) << c.what << ": not the JSON error envelope: " << r.body;
    if (!c.field.empty()) {
      EXPECT_EQ(r.json().value("field", ""), c.field) << c.what << ": " << r.body;
    }
  }
  EXPECT_EQ(call("GET", "/v1/agents", t.token).json()["agents"].size(), 1u) << "a refused agent was stored";
  EXPECT_EQ(state_of(t, exp), "queued") << "a refused event moved the experiment";
  EXPECT_EQ(call("GET", "/v1/audit/export", t.token).json()["entries"].size(), audit_before);

  // JSON on the same routes, as people and scripts send it.
  auto reg = call("POST", "/v1/agents/register", enroll, R"({"hostname":"json-host"})");
  EXPECT_EQ(reg.status, 201) << reg.describe();
  EXPECT_GT(reg.json().value("agent_id", int64_t{0}), 0) << reg.body;
}

// --- Policy distribution (api_policy.cpp) and agent labels. ---

std::string egress_yaml(const std::string& name, const std::string& cidr = "192.0.2.1/32") {
  return "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: " + name +
         "\nspec:\n  egress:\n    - cgroup: /fl-test/web\n      mode: enforce\n      rules:\n"
         "        - {name: block, action: deny, cidr: " +
         cidr + ", ports: [443], proto: tcp}\n";
}

std::string bundle(const std::string& policy_yaml, const std::string& selector = "") {
  json j{{"policy", policy_yaml}};
  if (!selector.empty()) j["selector"] = json::parse(selector);
  return j.dump();
}

// PUT stores a version (the same bundle again stores nothing), GET shows the
// newest or any version, export gives the file back and PUTting it back (JSON
// or YAML) changes nothing: the round trip keeps the selector.
TEST_P(ApiTest, PolicyBundlesAreVersionedAndExportRoundTrips) {
  Tenant t = tenant("pol", false);
  auto none = call("GET", "/v1/policy", t.token);
  EXPECT_EQ(none.status, 404) << none.describe();
  EXPECT_EQ(call("GET", "/v1/policy/export", t.token).status, 404);
  auto put = call("PUT", "/v1/policy", t.token, bundle(egress_yaml("web-egress"), R"({"labels":{"role":"web"}})"));
  ASSERT_EQ(put.status, 201) << put.describe();
  EXPECT_EQ(put.json()["version"], 1);
  EXPECT_EQ(put.json()["changed"], true);
  EXPECT_EQ(put.json()["selector"], json::parse(R"({"labels":{"role":"web"}})"));
  auto again = call("PUT", "/v1/policy", t.token, bundle(egress_yaml("web-egress"), R"({"labels":{"role":"web"}})"));
  EXPECT_EQ(again.status, 200) << again.describe();
  EXPECT_EQ(again.json()["version"], 1);
  EXPECT_EQ(again.json()["changed"], false);
  auto got = call("GET", "/v1/policy", t.token).json();
  EXPECT_EQ(got["version"], 1);
  EXPECT_EQ(got["name"], "web-egress");
  EXPECT_EQ(got["policy"]["spec"]["egress"][0]["cgroup"], "/fl-test/web") << got;

  auto exported = call("GET", "/v1/policy/export", t.token);
  ASSERT_EQ(exported.status, 200) << exported.describe();
  EXPECT_NE(exported.head.find("X-Faultline-Policy-Version: 1"), std::string::npos) << exported.head;
  // The file back as it came (a JSON document with apiVersion): the same bundle.
  auto back = call("PUT", "/v1/policy", t.token, exported.body);
  EXPECT_EQ(back.status, 200) << back.describe();
  EXPECT_EQ(back.json()["changed"], false);
  EXPECT_EQ(back.json()["selector"]["labels"]["role"], "web") << "a bare file keeps the selector";
  auto yaml = call("GET", "/v1/policy/export?format=yaml", t.token);
  ASSERT_EQ(yaml.status, 200);
  auto yaml_back = fltest::cp_request(server_->port(), "PUT", "/v1/policy", t.token, yaml.body, 10'000,
                                      {{"Content-Type", "application/yaml"}});
  EXPECT_EQ(yaml_back.status, 200) << yaml_back.describe();
  EXPECT_EQ(yaml_back.json()["changed"], false);
  // And the exported file is what faultctl policy validate reads.
  faultline::PolicyParse reread = faultline::parse_policy(exported.body);
  EXPECT_TRUE(reread.ok()) << exported.body;

  // A new policy, or the same with another selector, is a new version.
  auto v2 = call("PUT", "/v1/policy", t.token,
                 bundle(egress_yaml("web-egress", "192.0.2.2/32"), R"({"labels":{"role":"web"}})"));
  EXPECT_EQ(v2.status, 201) << v2.describe();
  EXPECT_EQ(v2.json()["version"], 2);
  auto v3 = call("PUT", "/v1/policy", t.token, bundle(egress_yaml("web-egress", "192.0.2.2/32"), R"({"all":true})"));
  EXPECT_EQ(v3.json()["version"], 3) << v3.describe();
  EXPECT_EQ(call("GET", "/v1/policy?version=1", t.token).json()["policy"]["spec"]["egress"][0]["rules"][0]["cidr"],
            "192.0.2.1");
  EXPECT_EQ(call("GET", "/v1/policy?version=9", t.token).status, 404);
  EXPECT_EQ(call("GET", "/v1/policy", t.token).json()["version"], 3);
  // Every stored version is in the activity log, none of the unchanged PUTs.
  int puts = 0;
  const json log = call("GET", "/v1/audit/export", t.token).json();
  for (const auto& e : log["entries"])
    if (e["action"] == "policy.put") ++puts;
  EXPECT_EQ(puts, 3) << log.dump();
  EXPECT_EQ(call("POST", "/v1/audit/verify", t.token).json()["ok"], true);
}

// The same parser and apply checks as faultctl: a bad bundle is a 400 naming
// the field (with line and column when the text was given), and nothing is stored.
TEST_P(ApiTest, BadPolicyBundlesAreRefusedNamingTheFieldAndNothingIsStored) {
  Tenant t = tenant("badpol", false);
  const std::string good = egress_yaml("ok");
  std::string bad_cidr = egress_yaml("x");
  bad_cidr.replace(bad_cidr.find("192.0.2.1/32"), 12, "192.0.2.300/32");
  std::string typo = egress_yaml("x");
  typo.replace(typo.find("mode:"), 5, "mdoe:");
  const std::string with_faults =
      "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: f}\nspec:\n  faults:\n"
      "    - {name: l, kind: loss, target: 10.0.0.1, percent: 5, duration: 10s}\n";
  struct Case {
    std::string what, body;
    std::string field;
    bool line = false;
    std::string content_type = "";
  };
  const std::vector<Case> cases = {
      {"not JSON", "{", ""},
      {"no policy", R"({"selector":{"all":true}})", "policy"},
      {"policy a number", R"({"policy":7})", "policy"},
      {"unknown member", bundle(good).substr(0, bundle(good).size() - 1) + R"(,"extra":1})", "extra"},
      {"bad cidr", bundle(bad_cidr), "policy.spec.egress[0].rules[0].cidr", true},
      {"unknown field", bundle(typo), "policy.spec.egress[0].mdoe", true},
      {"not YAML", bundle("apiVersion: [\n"), "policy.<document>", false},
      {"faults", bundle(with_faults), "policy.spec.faults"},
      {"selector all false", bundle(good, R"({"all":false})"), "selector.all"},
      {"selector all and labels", bundle(good, R"({"all":true,"labels":{"a":"b"}})"), "selector"},
      {"selector label key", bundle(good, R"({"labels":{"no spaces":"b"}})"), "selector.labels.no spaces"},
      {"selector label value", bundle(good, R"({"labels":{"role":7}})"), "selector.labels.role"},
      {"selector hostnames empty", bundle(good, R"({"hostnames":[]})"), "selector.hostnames"},
      {"selector unknown", bundle(good, R"({"zones":["a"]})"), "selector.zones"},
      {"bare file, bad cidr", bad_cidr, "spec.egress[0].rules[0].cidr", true, "application/yaml"},
      {"dry_run on PUT", json{{"policy", good}, {"dry_run", true}}.dump(), "dry_run"},
  };
  for (const auto& c : cases) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!c.content_type.empty()) headers.emplace_back("Content-Type", c.content_type);
    auto r = fltest::cp_request(server_->port(), "PUT", "/v1/policy", t.token, c.body, 10'000, headers);
    EXPECT_EQ(r.status, 400) << c.what << ": " << r.describe();
    if (!c.field.empty()) {
      EXPECT_EQ(r.json().value("field", ""), c.field) << c.what << ": " << r.describe();
    }
    if (c.line) {
      EXPECT_NE(r.json().value("error", "").find("(line "), std::string::npos) << c.what << ": " << r.describe();
      EXPECT_TRUE(r.json()["errors"][0].contains("line")) << c.what << ": " << r.describe();
    }
    // apply checks the same, dry run or not.
    auto dry = fltest::cp_request(server_->port(), "POST", "/v1/policy/apply", t.token, c.body, 10'000, headers);
    if (c.what != "dry_run on PUT") {
      EXPECT_EQ(dry.status, 400) << "apply: " << c.what << ": " << dry.describe();
    }
  }
  EXPECT_EQ(call("GET", "/v1/policy", t.token).status, 404) << "a refused bundle was stored";
  const json log = call("GET", "/v1/audit/export", t.token).json();
  ASSERT_FALSE(log["entries"].empty());
  for (const auto& e : log["entries"])
    EXPECT_EQ(e["action"].get<std::string>().rfind("policy.", 0), std::string::npos) << e;
  // Agents' labels follow the same rules at registration.
  auto enr = call("POST", "/v1/tokens", t.token, R"({"kind":"enrollment"})").json().value("token", "");
  auto reg = call("POST", "/v1/agents/register", enr, R"({"hostname":"h","labels":{"role":"a b"}})");
  EXPECT_EQ(reg.status, 400) << reg.describe();
  EXPECT_EQ(reg.json().value("field", ""), "labels.role");
  EXPECT_TRUE(call("GET", "/v1/agents", t.token).json()["agents"].empty());
}

// An agent polling is handed the newest version at once (a held poll is
// woken), selected or not; it reports what it made of it, and is not handed
// that version again; GET /v1/agents shows per agent what it runs.
TEST_P(ApiTest, APolicyReachesAgentsAtTheirNextPollAndEachReportsItsVersion) {
  Tenant t = tenant("dist", false);
  std::string web_token, db_token;
  const int64_t web = register_agent(t.token, "web-1", R"({"role":"web","zone":"eu"})", &web_token);
  const int64_t db = register_agent(t.token, "db-1", R"({"role":"db"})", &db_token);
  EXPECT_EQ(agent_row(t.token, web)["labels"], json::parse(R"({"role":"web","zone":"eu"})"));
  EXPECT_TRUE(agent_row(t.token, web)["policy_version"].is_null());
  const std::string web_next = "/v1/agents/" + std::to_string(web) + "/next";
  const std::string db_next = "/v1/agents/" + std::to_string(db) + "/next";
  auto report = [&](int64_t agent, const std::string& token, const std::string& body) {
    return call("POST", "/v1/agents/" + std::to_string(agent) + "/policy", token, body);
  };

  auto held = std::async(std::launch::async, [&] { return call("GET", web_next, web_token); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto put_at = Clock::now();
  auto put = call("PUT", "/v1/policy", t.token, bundle(egress_yaml("web-egress"), R"({"labels":{"role":"web"}})"));
  ASSERT_EQ(put.status, 201) << put.describe();
  auto woke = held.get();
  EXPECT_LT(Clock::now() - put_at, std::chrono::milliseconds(500)) << "the new policy did not wake the poll";
  ASSERT_TRUE(woke.json().contains("policy")) << woke.body;
  EXPECT_EQ(woke.json()["policy"]["version"], 1);
  EXPECT_EQ(woke.json()["policy"]["selected"], true);
  faultline::PolicyParse given = faultline::parse_policy(woke.json()["policy"]["text"].get<std::string>());
  ASSERT_TRUE(given.ok()) << woke.body;
  EXPECT_EQ(given.policy.name, "web-egress");
  auto db_poll = call("GET", db_next + "?wait_ms=0", db_token).json();
  EXPECT_EQ(db_poll["policy"]["selected"], false) << db_poll;
  EXPECT_EQ(db_poll["policy"]["text"], "");

  EXPECT_EQ(report(web, web_token, R"({"version":1,"status":"applied","running_version":1})").status, 200);
  EXPECT_EQ(report(db, db_token, R"({"version":1,"status":"not-selected"})").status, 200);
  EXPECT_FALSE(call("GET", web_next + "?wait_ms=0", web_token).json().contains("policy")) << "handed again";
  EXPECT_FALSE(call("GET", db_next + "?wait_ms=0", db_token).json().contains("policy"));
  auto w = agent_row(t.token, web);
  EXPECT_EQ(w["policy_version"], 1) << w;
  EXPECT_EQ(w["policy_status"], "applied");
  auto d = agent_row(t.token, db);
  EXPECT_TRUE(d["policy_version"].is_null()) << d;
  EXPECT_EQ(d["policy_status"], "not-selected");
  EXPECT_EQ(d["policy_reported_version"], 1);

  // Version 2 fails on the host: the old one stays, the error is shown.
  ASSERT_EQ(call("PUT", "/v1/policy", t.token, bundle(egress_yaml("web-egress", "192.0.2.9/32"))).status, 201);
  EXPECT_EQ(call("GET", web_next + "?wait_ms=0", web_token).json()["policy"]["version"], 2);
  EXPECT_EQ(
      report(web, web_token,
             R"({"version":2,"status":"failed","running_version":1,"detail":"spec.egress[0].cgroup: no such cgroup"})")
          .status,
      200);
  w = agent_row(t.token, web);
  EXPECT_EQ(w["policy_version"], 1) << w;
  EXPECT_EQ(w["policy_status"], "failed");
  EXPECT_EQ(w["policy_reported_version"], 2);
  EXPECT_NE(w["policy_detail"].get<std::string>().find("no such cgroup"), std::string::npos);
  EXPECT_FALSE(call("GET", web_next + "?wait_ms=0", web_token).json().contains("policy"))
      << "a failure is not retried in a loop";

  // Reports are checked.
  EXPECT_EQ(report(web, web_token, R"({"version":2,"status":"done"})").status, 400);
  EXPECT_EQ(report(web, web_token, R"({"version":9,"status":"applied"})").status, 404);
  EXPECT_EQ(report(web, web_token, R"({"status":"applied"})").status, 400);
  EXPECT_EQ(report(db, web_token, R"({"version":2,"status":"applied"})").status, 404) << "another agent's route";

  // A dry run says who would get it and what it compiles to; it stores nothing.
  auto dry = call(
      "POST", "/v1/policy/apply", t.token,
      json{{"policy", egress_yaml("db-egress")}, {"selector", {{"hostnames", {"db-1"}}}}, {"dry_run", true}}.dump());
  ASSERT_EQ(dry.status, 200) << dry.describe();
  EXPECT_EQ(dry.json()["dry_run"], true);
  EXPECT_EQ(dry.json()["changed"], true);
  EXPECT_EQ(dry.json()["version"], 3);
  ASSERT_EQ(dry.json()["agents"].size(), 1u) << dry.body;
  EXPECT_EQ(dry.json()["agents"][0]["hostname"], "db-1");
  EXPECT_EQ(dry.json()["not_selected"].size(), 1u);
  EXPECT_EQ(dry.json()["summary"]["scopes"][0]["scope"], "cgroup /fl-test/web") << dry.body;
  EXPECT_EQ(dry.json()["summary"]["scopes"][0]["deny_prefixes"], 1);
  EXPECT_EQ(call("GET", "/v1/policy", t.token).json()["version"], 2) << "a dry run stored a version";
  auto applied = call("POST", "/v1/policy/apply", t.token,
                      json{{"policy", egress_yaml("db-egress")}, {"selector", {{"hostnames", {"db-1"}}}}}.dump());
  EXPECT_EQ(applied.status, 201) << applied.describe();
  EXPECT_EQ(applied.json()["version"], 3);
  EXPECT_EQ(call("GET", db_next + "?wait_ms=0", db_token).json()["policy"]["selected"], true);
  EXPECT_EQ(call("GET", web_next + "?wait_ms=0", web_token).json()["policy"]["selected"], false);

  // Experiments select by labels too: one per agent matching all of them.
  const std::string spec = R"("spec":{"kind":"loss","target":"10.0.0.1","percent":10,"duration_sec":5})";
  auto by_label = call("POST", "/v1/experiments", t.token, R"({"selector":{"labels":{"role":"web"}},)" + spec + "}");
  ASSERT_EQ(by_label.status, 201) << by_label.describe();
  ASSERT_EQ(by_label.json()["experiments"].size(), 1u);
  EXPECT_EQ(by_label.json()["experiments"][0]["agent_id"], web);
  auto both = call("POST", "/v1/experiments", t.token,
                   R"({"selector":{"labels":{"role":"web"},"hostnames":["db-1"]},)" + spec + "}");
  EXPECT_EQ(both.status, 404) << "hostnames and labels must both match: " << both.describe();
  auto nobody = call("POST", "/v1/experiments", t.token, R"({"selector":{"labels":{"role":"cache"}},)" + spec + "}");
  EXPECT_EQ(nobody.status, 404) << nobody.describe();
  EXPECT_EQ(nobody.json().value("field", ""), "selector.labels");
}

INSTANTIATE_TEST_SUITE_P(Backends, ApiTest, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

}  // namespace
