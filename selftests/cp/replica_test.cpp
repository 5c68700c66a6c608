// Two faultcp processes on one PostgreSQL database serve one fleet: an agent
// long-polling replica A is handed an experiment created through replica B,
// and is told to stop when the kill switch is engaged on B, each within the
// kill switch's bound (1 s), woken through LISTEN/NOTIFY rather than at the
// poll's end; and is given a policy put on B the same way. A guard waiting on
// A hears a decision and a new guard section made on B the same way.
#include <gtest/gtest.h>

#include <csignal>
#include <future>
#include <vector>

#include "cp_client.h"
#include "selftests/lib/child_process.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct Replica {
  fltest::ChildProcess process;
  uint16_t port = 0;
};

Replica start_replica(const std::string& url) {
  // A poll held 20 s: an answer within a second can only come from a wake-up.
  auto cp = fltest::ChildProcess::spawn(
      {FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database", url, "--poll-timeout-ms", "20000"});
  auto line = cp.wait_line_starting("faultcp: listening on", 20s);
  if (!line) ADD_FAILURE() << cp.describe();
  const auto at = line ? line->find("127.0.0.1:") : std::string::npos;
  const uint16_t port = at == std::string::npos ? 0 : static_cast<uint16_t>(std::stoul(line->substr(at + 10)));
  return Replica{std::move(cp), port};
}

TEST(Replicas, AnAgentPollingOneReplicaHearsWorkAndTheKillFromTheOther) {
  fltest::TestDatabase db(fltest::Backend::Postgres);
  auto a = start_replica(db.url());
  auto b = start_replica(db.url());
  ASSERT_NE(a.port, 0);
  ASSERT_NE(b.port, 0);
  auto signup = fltest::cp_request(b.port, "POST", "/v1/auth/signup", "",
                                   R"({"email":"r@example.com","password":"correct horse battery","workspace":"r"})");
  const std::string token = signup.json().value("token", "");
  const std::string enroll =
      fltest::cp_request(b.port, "POST", "/v1/tokens", token, R"({"kind":"enrollment"})").json().value("token", "");
  auto reg = fltest::cp_request(a.port, "POST", "/v1/agents/register", enroll, R"({"hostname":"web-1"})").json();
  const std::string agent = std::to_string(reg.value("agent_id", 0)), agent_token = reg.value("token", "");
  const std::string next = "/v1/agents/" + agent + "/next";
  ASSERT_FALSE(agent_token.empty()) << reg;

  // Work created on B reaches the poll held by A.
  auto poll =
      std::async(std::launch::async, [&] { return fltest::cp_request(a.port, "GET", next, agent_token, "", 25'000); });
  std::this_thread::sleep_for(300ms);  // the poll is held
  const auto created_at = std::chrono::steady_clock::now();
  auto created = fltest::cp_request(
      b.port, "POST", "/v1/experiments", token,
      R"({"agent_id":)" + agent + R"(,"spec":{"kind":"loss","target":"10.0.0.1","duration_sec":30}})");
  ASSERT_EQ(created.status, 201) << created.describe();
  const int64_t id = created.json().value("id", int64_t{0});
  ASSERT_EQ(poll.wait_for(5s), std::future_status::ready) << "replica A's poll was not woken";
  const auto got = poll.get();
  const auto dispatch_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - created_at).count();
  ASSERT_EQ(got.status, 200) << got.describe();
  EXPECT_EQ(got.json()["experiment"]["id"], id) << got.describe();
  EXPECT_LT(dispatch_ms, 1000) << "dispatch across replicas took " << dispatch_ms << " ms";
  ASSERT_EQ(fltest::cp_request(a.port, "POST", "/v1/agents/" + agent + "/events", agent_token,
                               R"({"experiment_id":)" + std::to_string(id) + R"(,"type":"running"})")
                .status,
            200);

  // The kill engaged on B stops the experiment on the agent polling A.
  auto held =
      std::async(std::launch::async, [&] { return fltest::cp_request(a.port, "GET", next, agent_token, "", 25'000); });
  std::this_thread::sleep_for(300ms);
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(fltest::cp_request(b.port, "POST", "/v1/kill", token).status, 200);
  ASSERT_EQ(held.wait_for(5s), std::future_status::ready) << "replica A's poll did not hear the kill";
  const auto stop = held.get();
  const auto kill_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_EQ(stop.json()["stop"], json::array({id})) << stop.describe();
  EXPECT_EQ(stop.json()["kill"], true) << stop.describe();
  EXPECT_LT(kill_ms, 1000) << "the kill across replicas took " << kill_ms << " ms";
  std::printf("replicas: dispatch B -> agent on A %lld ms, kill B -> agent on A %lld ms\n",
              static_cast<long long>(dispatch_ms), static_cast<long long>(kill_ms));

  // A policy put on B reaches the agent polling A (a wake-up for every agent
  // of the workspace), within the same bound. (The stop confirmed first: a
  // stop is answered before anything else.)
  ASSERT_EQ(fltest::cp_request(a.port, "POST", "/v1/agents/" + agent + "/events", agent_token,
                               R"({"experiment_id":)" + std::to_string(id) + R"(,"type":"stopped"})")
                .status,
            200);
  auto policy_poll =
      std::async(std::launch::async, [&] { return fltest::cp_request(a.port, "GET", next, agent_token, "", 25'000); });
  std::this_thread::sleep_for(300ms);
  const auto put_at = std::chrono::steady_clock::now();
  auto put =
      fltest::cp_request(b.port, "PUT", "/v1/policy", token,
                         json{{"policy",
                               "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: fleet}\n"
                               "spec: {egress: [{all: true, rules: [{name: t, action: deny, cidr: 192.0.2.1}]}]}\n"}}
                             .dump());
  ASSERT_EQ(put.status, 201) << put.describe();
  ASSERT_EQ(policy_poll.wait_for(5s), std::future_status::ready) << "replica A's poll did not hear the policy";
  const auto given = policy_poll.get();
  const auto policy_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - put_at).count();
  EXPECT_EQ(given.json()["policy"]["version"], 1) << given.describe();
  EXPECT_EQ(given.json()["policy"]["selected"], true) << given.describe();
  EXPECT_LT(policy_ms, 1000) << "the policy across replicas took " << policy_ms << " ms";
  std::printf("replicas: policy put on B -> agent on A %lld ms\n", static_cast<long long>(policy_ms));
  EXPECT_EQ(fltest::cp_request(a.port, "POST", "/v1/audit/verify", token).json()["ok"], true);
  for (auto* r : {&a, &b}) {
    r->process.signal(SIGTERM);
    auto st = r->process.wait(10s);
    ASSERT_TRUE(st.has_value()) << r->process.describe();
    EXPECT_TRUE(st->is(0)) << r->process.describe();
  }
}

TEST(Replicas, AGuardWaitingOnOneReplicaHearsADecisionAndANewSectionFromTheOther) {
  fltest::TestDatabase db(fltest::Backend::Postgres);
  auto a = start_replica(db.url());
  auto b = start_replica(db.url());
  ASSERT_NE(a.port, 0);
  ASSERT_NE(b.port, 0);
  auto signup = fltest::cp_request(b.port, "POST", "/v1/auth/signup", "",
                                   R"({"email":"g@example.com","password":"correct horse battery","workspace":"g"})");
  const std::string token = signup.json().value("token", "");
  const std::string enroll =
      fltest::cp_request(b.port, "POST", "/v1/tokens", token, R"({"kind":"enrollment"})").json().value("token", "");
  const std::string guard = fltest::cp_request(a.port, "POST", "/v1/agents/register", enroll, R"({"hostname":"g"})")
                                .json()
                                .value("token", "");
  const auto expires =
      std::chrono::duration_cast<std::chrono::milliseconds>((std::chrono::system_clock::now() + 60s).time_since_epoch())
          .count();
  auto held = fltest::cp_request(a.port, "POST", "/v1/guardrails/approvals", guard,
                                 json{{"request_id", "r-1"},
                                      {"identity", "alice"},
                                      {"host", "api.prod.example.com"},
                                      {"expires_at", std::to_string(expires)}}
                                     .dump());
  ASSERT_EQ(held.status, 201) << held.describe();
  const std::string id = std::to_string(held.json().value("id", int64_t{0}));

  auto wait = std::async(std::launch::async, [&] {
    return fltest::cp_request(a.port, "GET", "/v1/guardrails/approvals/" + id + "/decision?wait=30s", guard, "",
                              35'000);
  });
  std::this_thread::sleep_for(300ms);
  const auto decided_at = std::chrono::steady_clock::now();
  ASSERT_EQ(fltest::cp_request(b.port, "POST", "/v1/guardrails/approvals/" + id + "/approve", token).status, 200);
  ASSERT_EQ(wait.wait_for(5s), std::future_status::ready) << "replica A's guard did not hear the decision";
  const auto decision = wait.get();
  const auto decision_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - decided_at).count();
  EXPECT_EQ(decision.json()["decision"], "approve") << decision.describe();
  EXPECT_LT(decision_ms, 1000) << "the decision across replicas took " << decision_ms << " ms";

  auto section = std::async(std::launch::async, [&] {
    return fltest::cp_request(a.port, "GET", "/v1/guardrails/policy?since_version=0&wait=30s", guard, "", 35'000);
  });
  std::this_thread::sleep_for(300ms);
  const auto put_at = std::chrono::steady_clock::now();
  ASSERT_EQ(fltest::cp_request(b.port, "PUT", "/v1/guardrails/policy", token,
                               R"({"mode":"enforce","rules":[{"name":"n","action":"deny","host":"evil.example.com"}]})")
                .status,
            201);
  ASSERT_EQ(section.wait_for(5s), std::future_status::ready) << "replica A's guard did not hear the new section";
  const auto given = section.get();
  const auto section_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - put_at).count();
  EXPECT_EQ(given.json()["version"], 1) << given.describe();
  EXPECT_LT(section_ms, 1000) << "the guard section across replicas took " << section_ms << " ms";
  std::printf("replicas: approval decided on B -> guard on A %lld ms, guard section put on B -> guard on A %lld ms\n",
              static_cast<long long>(decision_ms), static_cast<long long>(section_ms));
  for (auto* r : {&a, &b}) {
    r->process.signal(SIGTERM);
    EXPECT_TRUE(r->process.wait(10s).has_value()) << r->process.describe();
  }
}

// The shared LLM budget across replicas: 20 reservations at once, half
// through each replica, with budget for 10 calls admit exactly 10 (each one a
// transaction under the workspace's advisory lock: the two processes cannot
// both read the counters before either writes).
TEST(Replicas, TheSharedBudgetCannotBeOverspentThroughTwoReplicas) {
  fltest::TestDatabase db(fltest::Backend::Postgres);
  auto a = start_replica(db.url());
  auto b = start_replica(db.url());
  ASSERT_NE(a.port, 0);
  ASSERT_NE(b.port, 0);
  auto signup = fltest::cp_request(a.port, "POST", "/v1/auth/signup", "",
                                   R"({"email":"b@example.com","password":"correct horse battery","workspace":"b"})");
  const std::string token = signup.json().value("token", "");
  ASSERT_FALSE(token.empty()) << signup.describe();
  const std::string ask =
      R"({"identity":"alice@laptop","window_s":86400,"tokens":100,"request_limit":10,"token_limit":100000})";
  std::vector<std::future<fltest::CpReply>> calls;
  for (int i = 0; i < 20; ++i) {
    const uint16_t port = i % 2 == 0 ? a.port : b.port;
    calls.push_back(std::async(std::launch::async, [port, &token, &ask] {
      return fltest::cp_request(port, "POST", "/v1/guardrails/budget/reserve", token, ask);
    }));
  }
  int admitted = 0, refused = 0;
  for (auto& f : calls) {
    auto r = f.get();
    ASSERT_EQ(r.status, 200) << r.describe();
    (r.json()["admitted"] == true ? admitted : refused) += 1;
  }
  EXPECT_EQ(admitted, 10);
  EXPECT_EQ(refused, 10);
  auto charge =
      fltest::cp_request(b.port, "GET", "/v1/guardrails/budget?identity=alice%40laptop&window_s=86400", token).json();
  EXPECT_EQ(charge["requests"], 10) << charge;
  EXPECT_EQ(charge["tokens"], 1000) << charge;
}

}  // namespace
