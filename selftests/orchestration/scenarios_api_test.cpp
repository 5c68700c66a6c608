// Scenarios on faultcp, both backends: a scenario stored through the CLI's
// reader (bad input named by field, malformed JSON by line and column), run on
// an agent step by step (the test is the agent: it long-polls and reports as
// faultd does), on_failure, abort, a template step the validator refuses; and
// at most once: faultcp killed with SIGKILL mid-scenario and started again
// (SQLite), or killed while a second replica serves the same PostgreSQL
// database, and every step's experiment is created exactly once and the run
// finishes.
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "cp/webhooks/webhook_sender.h"
#include "cp_client.h"
#include "cp_fleet.h"
#include "selftests/lib/child_process.h"

namespace florch {
namespace {

using fltest::Backend;
using fltest::CpReply;
using nlohmann::json;
using namespace std::chrono_literals;

json loss_step(const std::string& name, int seconds) {
  return {{"name", name},
          {"experiment", {{"kind", "loss"}, {"target", "10.0.0.1"}, {"percent", 10}, {"duration_sec", seconds}}}};
}

json scenario_doc(const std::string& name, json steps, const std::string& on_failure = "abort") {
  return {{"kind", "Scenario"},
          {"name", name},
          {"max_duration_s", 600},
          {"on_failure", on_failure},
          {"steps", std::move(steps)}};
}

// One workspace with one agent, served on `port` (in-process or a faultcp).
// The workspace's fleet, with the scenario runs' reads.
struct Fleet : CpFleet {
  json run(int64_t id) const { return call("GET", "/v1/scenario-runs/" + std::to_string(id)).json(); }
  // Waits for the run to leave `running`; its JSON.
  json finished(int64_t id, std::chrono::milliseconds within = 20s) const {
    const auto until = std::chrono::steady_clock::now() + within;
    json r;
    while (std::chrono::steady_clock::now() < until) {
      r = run(id);
      if (r.is_object() && r.value("state", "") != "running") return r;
      std::this_thread::sleep_for(50ms);
    }
    return r;
  }
  // Waits until the run has `n` step results (a worker took the report and
  // moved on, however busy the machine); its JSON.
  json steps_done(int64_t id, size_t n, std::chrono::milliseconds within = 10s) const {
    const auto until = std::chrono::steady_clock::now() + within;
    json r;
    while (std::chrono::steady_clock::now() < until) {
      r = run(id);
      if (r.is_object() && r.contains("steps") && r["steps"].size() >= n) return r;
      std::this_thread::sleep_for(50ms);
    }
    return r;
  }
  int64_t created_audited() const {
    int64_t n = 0;
    const json bundle = call("GET", "/v1/audit/export").json();  // kept: a range over a temporary's member dangles
    for (const auto& e : bundle["entries"]) n += e.value("action", "") == "experiment.create" ? 1 : 0;
    return n;
  }
};

Fleet signup(uint16_t port, const std::string& name) { return Fleet{cp_signup(port, name)}; }

int64_t store_scenario(const Fleet& f, const json& doc) {
  auto r = f.call("POST", "/v1/scenarios", doc.dump());
  EXPECT_EQ(r.status, 201) << r.describe();
  return r.json().value("id", int64_t{0});
}

int64_t start_run(const Fleet& f, int64_t scenario) {
  auto r = f.call("POST", "/v1/scenarios/" + std::to_string(scenario) + "/run", json{{"agent_id", f.agent}}.dump());
  EXPECT_EQ(r.status, 201) << r.describe();
  return r.json().value("id", int64_t{0});
}

class ScenariosApi : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    auto config = fltest::test_config();
    config.scenario_tick = 100ms;
    server_ = std::make_unique<fltest::CpServer>(GetParam(), config);
    fleet_ = signup(server_->port(), "acme");
  }
  std::unique_ptr<fltest::CpServer> server_;
  Fleet fleet_;
};

TEST_P(ScenariosApi, BadScenariosAreRefusedNamingTheFieldOrTheLineAndColumn) {
  auto malformed = fleet_.call("POST", "/v1/scenarios", "{\n  \"kind\": \"Scenario\",\n  \"name\": ,\n}");
  EXPECT_EQ(malformed.status, 400) << malformed.describe();
  EXPECT_EQ(malformed.json().value("line", 0), 3) << malformed.body;
  EXPECT_EQ(malformed.json().value("column", 0), 11) << malformed.body;
  EXPECT_NE(malformed.json().value("error", "").find("line 3, column 11"), std::string::npos) << malformed.body;

  auto bad_wait = scenario_doc("s", {loss_step("a", 5), {{"wait_s", 0}}});
  auto r = fleet_.call("POST", "/v1/scenarios", bad_wait.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json().value("field", ""), "steps[1].wait_s") << r.body;

  auto over = scenario_doc("s", {loss_step("a", 500), loss_step("b", 500)});
  r = fleet_.call("POST", "/v1/scenarios", over.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json().value("field", ""), "max_duration_s") << r.body;

  auto unknown = scenario_doc("s", {{{"template", "disk_melt"}, {"cgroup", "/a"}}});
  r = fleet_.call("POST", "/v1/scenarios", unknown.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json().value("field", ""), "steps[0].template") << r.body;
  EXPECT_EQ(fleet_.call("GET", "/v1/scenarios").json()["scenarios"].size(), 0u) << "nothing stored";
}

TEST_P(ScenariosApi, ARunDispatchesEachStepOnceInOrderAndCompletes) {
  const int64_t id =
      store_scenario(fleet_, scenario_doc("s1", {loss_step("first", 5), {{"wait_s", 1}}, loss_step("second", 5)}));
  auto got = fleet_.call("GET", "/v1/scenarios/" + std::to_string(id));
  EXPECT_EQ(got.json().value("steps", 0), 3) << got.body;
  EXPECT_EQ(fleet_.call("POST", "/v1/scenarios", scenario_doc("s1", json::array({loss_step("a", 5)})).dump()).status,
            409);
  EXPECT_EQ(fleet_.call("POST", "/v1/scenarios/" + std::to_string(id) + "/run", R"({"agent_id":999})").status, 404);

  const int64_t run = start_run(fleet_, id);
  const int64_t first = fleet_.take();
  ASSERT_NE(first, 0) << "the first step's experiment reaches the agent";
  EXPECT_EQ(fleet_.take(300), 0) << "nothing else while the first step runs";
  fleet_.report(first, "completed");
  const auto waited_from = std::chrono::steady_clock::now();
  const int64_t second = fleet_.take(5000);
  ASSERT_NE(second, 0);
  EXPECT_GE(std::chrono::steady_clock::now() - waited_from, 900ms) << "the wait step held the second step back";
  fleet_.report(second, "completed");
  const json done = fleet_.finished(run);
  EXPECT_EQ(done.value("state", ""), "completed") << done;
  ASSERT_EQ(done["steps"].size(), 3u) << done;
  EXPECT_EQ(done["steps"][0]["experiment_id"], first);
  EXPECT_EQ(done["steps"][1]["wait_s"], 1);
  EXPECT_EQ(done["steps"][2]["experiment_id"], second);
  EXPECT_EQ(fleet_.experiments(), 2u);
  EXPECT_EQ(fleet_.created_audited(), 2);
}

TEST_P(ScenariosApi, OnFailureAbortStopsAndContinueRunsOn) {
  const int64_t stop = store_scenario(fleet_, scenario_doc("stop", {loss_step("a", 5), loss_step("b", 5)}));
  int64_t run = start_run(fleet_, stop);
  int64_t exp = fleet_.take();
  ASSERT_NE(exp, 0);
  fleet_.report(exp, "failed");
  json done = fleet_.finished(run);
  EXPECT_EQ(done.value("state", ""), "failed") << done;
  EXPECT_EQ(done.value("code", ""), "step_failed");
  EXPECT_EQ(fleet_.take(500), 0) << "step b never starts";

  const int64_t go = store_scenario(fleet_, scenario_doc("go", {loss_step("a", 5), loss_step("b", 5)}, "continue"));
  run = start_run(fleet_, go);
  exp = fleet_.take();
  ASSERT_NE(exp, 0);
  fleet_.report(exp, "failed");
  exp = fleet_.take();
  ASSERT_NE(exp, 0) << "on_failure: continue runs step b";
  fleet_.report(exp, "completed");
  done = fleet_.finished(run);
  EXPECT_EQ(done.value("state", ""), "failed") << "a step failed: " << done;
  EXPECT_EQ(done["steps"].size(), 2u);

  // A guardrail's abort ends the run whatever on_failure says.
  run = start_run(fleet_, go);
  exp = fleet_.take();
  ASSERT_NE(exp, 0);
  fleet_.report(exp, "aborted-by-slo");
  done = fleet_.finished(run);
  EXPECT_EQ(done.value("state", ""), "aborted") << done;
  EXPECT_EQ(done.value("code", ""), "guardrail_abort");
}

TEST_P(ScenariosApi, AbortCancelsTheStepOutAndEndsTheRun) {
  const int64_t id = store_scenario(fleet_, scenario_doc("s", {loss_step("a", 30), loss_step("b", 30)}));
  const int64_t run = start_run(fleet_, id);
  const int64_t exp = fleet_.take();
  ASSERT_NE(exp, 0);
  auto r = fleet_.call("POST", "/v1/scenario-runs/" + std::to_string(run) + "/abort");
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json().value("state", ""), "aborted");
  EXPECT_EQ(fleet_.call("GET", "/v1/experiments/" + std::to_string(exp)).json().value("status", ""), "cancelled");
  EXPECT_EQ(fleet_.call("POST", "/v1/scenario-runs/" + std::to_string(run) + "/abort").status, 409);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(fleet_.experiments(), 1u) << "step b never created";
}

TEST_P(ScenariosApi, ATemplateStepOnNoRegisteredServiceIsRefusedAtDispatch) {
  json tmpl{{"name", "cpu"},
            {"template", "cpu_stress_one"},
            {"params", {{"load", 20}, {"duration_s", 30}}},
            {"cgroup", "/app.slice/a"}};
  const int64_t id = store_scenario(fleet_, scenario_doc("t", json::array({tmpl})));
  const int64_t run = start_run(fleet_, id);
  const json done = fleet_.finished(run);
  EXPECT_EQ(done.value("state", ""), "refused") << done;
  EXPECT_EQ(done.value("code", ""), "not_opted_in") << done;
  EXPECT_EQ(fleet_.experiments(), 0u) << "nothing dispatched";
}

TEST_P(ScenariosApi, TheKillSwitchEndsTheRun) {
  const int64_t id = store_scenario(fleet_, scenario_doc("k", {loss_step("a", 30), loss_step("b", 30)}));
  const int64_t run = start_run(fleet_, id);
  ASSERT_NE(fleet_.take(), 0);
  ASSERT_EQ(fleet_.call("POST", "/v1/kill").status, 200);
  const json done = fleet_.finished(run);
  EXPECT_EQ(done.value("state", ""), "aborted") << done;
  EXPECT_EQ(done.value("code", ""), "cancelled");
  EXPECT_EQ(fleet_.experiments(), 1u);
}

// A deploy pipeline's trigger, signed as an alert is: one run per delivery.
TEST_P(ScenariosApi, ASignedTriggerStartsOneRunPerDelivery) {
  const std::string secret = "trigger-secret-abcdefghijklmnop";
  ASSERT_EQ(fleet_
                .call("PUT", "/v1/webhooks",
                      json{{"url", "http://127.0.0.1:9/unused"},
                           {"secret", "outbound-secret-abcdefghijklmnop"},
                           {"alert_secret", secret},
                           {"triggers", json::array()}}
                          .dump())
                .status,
            200);
  const int64_t id = store_scenario(fleet_, scenario_doc("deploy", json::array({loss_step("a", 5)})));
  const std::string path = "/webhooks/trigger/" + std::to_string(id) + "?workspace=acme";
  const std::string body = json{{"agent_id", fleet_.agent}, {"reason", "deploy 42"}}.dump();
  auto post = [&](const std::string& key, int64_t ts, const std::string& text) {
    return fltest::cp_request(server_->port(), "POST", path, "", text, 10'000,
                              {{"X-Faultline-Timestamp", std::to_string(ts)},
                               {"X-Faultline-Signature", faultline::cp::webhook_signature(key, ts, text)}});
  };
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto bad = post("not-the-secret-at-all-0123456789", now, body);
  EXPECT_EQ(bad.status, 401) << bad.describe();
  EXPECT_EQ(bad.json().value("field", ""), "X-Faultline-Signature");
  auto stale = post(secret, now - 120, body);
  EXPECT_EQ(stale.status, 401) << stale.describe();
  EXPECT_EQ(stale.json().value("field", ""), "X-Faultline-Timestamp");
  EXPECT_EQ(fleet_.call("GET", "/v1/scenario-runs").json()["runs"].size(), 0u) << "a refused trigger starts nothing";

  auto first = post(secret, now, body);
  ASSERT_EQ(first.status, 201) << first.describe();
  EXPECT_EQ(first.json().value("created_by", "").rfind("trigger:", 0), 0u) << first.body;
  auto again = post(secret, now, body);  // the same delivery, sent twice
  EXPECT_EQ(again.status, 409) << again.describe();
  EXPECT_EQ(fleet_.call("GET", "/v1/scenario-runs").json()["runs"].size(), 1u) << "one run for one delivery";
  EXPECT_EQ(fleet_.experiments(), 1u);
  auto later = post(secret, now + 1, body);  // the next deploy
  EXPECT_EQ(later.status, 201) << later.describe();
  EXPECT_EQ(fleet_.call("GET", "/v1/scenario-runs").json()["runs"].size(), 2u);
  auto missing = post(secret, now + 2, json{{"agent_id", 999}}.dump());
  EXPECT_EQ(missing.status, 404) << missing.describe();
}

INSTANTIATE_TEST_SUITE_P(Backends, ScenariosApi, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

// A faultcp process on `url`; its port.
struct Replica {
  fltest::ChildProcess process;
  uint16_t port = 0;
};

Replica start_replica(const std::string& url) {
  auto cp = fltest::ChildProcess::spawn({FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database", url});
  auto line = cp.wait_line_starting("faultcp: listening on", 20s);
  if (!line) ADD_FAILURE() << cp.describe();
  const auto at = line ? line->find("127.0.0.1:") : std::string::npos;
  const uint16_t port = at == std::string::npos ? 0 : static_cast<uint16_t>(std::stoul(line->substr(at + 10)));
  return Replica{std::move(cp), port};
}

void kill9(Replica& r) {
  r.process.signal(SIGKILL);
  auto st = r.process.wait(5s);
  ASSERT_TRUE(st && st->killed_by(SIGKILL)) << r.process.describe();
}

// first (an experiment), a wait of 3 s, second (an experiment): faultcp is
// killed once while the first step's experiment runs and once during the wait.
json resume_doc() { return scenario_doc("resume", {loss_step("first", 5), {{"wait_s", 3}}, loss_step("second", 5)}); }

TEST(ScenarioResume, KilledFaultcpResumesOnSqliteEachStepOnce) {
  fltest::TestDatabase db(Backend::Sqlite);
  auto a = start_replica(db.url());
  ASSERT_NE(a.port, 0);
  Fleet f = signup(a.port, "resume");
  const int64_t run = start_run(f, store_scenario(f, resume_doc()));
  const int64_t first = f.take();
  ASSERT_NE(first, 0);
  kill9(a);  // mid-step: the first experiment is out

  auto b = start_replica(db.url());
  ASSERT_NE(b.port, 0);
  f.port = b.port;
  f.report(first, "completed");
  const json waiting = f.steps_done(run, 1);  // the worker saw it: the run is in its wait
  ASSERT_EQ(waiting["steps"].size(), 1u) << waiting;
  kill9(b);  // mid-wait

  auto c = start_replica(db.url());
  ASSERT_NE(c.port, 0);
  f.port = c.port;
  const int64_t second = f.take(10'000);
  ASSERT_NE(second, 0) << "the restarted faultcp resumed the run";
  EXPECT_NE(second, first);
  f.report(second, "completed");
  const json done = f.finished(run);
  EXPECT_EQ(done.value("state", ""), "completed") << done;
  EXPECT_EQ(done["steps"].size(), 3u) << done;
  EXPECT_EQ(f.experiments(), 2u) << "each step's experiment created once";
  EXPECT_EQ(f.created_audited(), 2);
}

TEST(ScenarioResume, TwoReplicasOnPostgresOneKilledEachStepOnce) {
  fltest::TestDatabase db(Backend::Postgres);
  auto a = start_replica(db.url());
  auto b = start_replica(db.url());
  ASSERT_NE(a.port, 0);
  ASSERT_NE(b.port, 0);
  Fleet f = signup(a.port, "pair");
  // Both replicas' workers see every checkpoint from here on.
  const int64_t run = start_run(f, store_scenario(f, resume_doc()));
  const int64_t first = f.take();
  ASSERT_NE(first, 0);
  f.report(first, "completed");
  const json waiting = f.steps_done(run, 1);  // one of them moved the run into its wait
  ASSERT_EQ(waiting["steps"].size(), 1u) << waiting;
  kill9(a);

  f.port = b.port;
  const int64_t second = f.take(10'000);
  ASSERT_NE(second, 0) << "replica B carried the run on";
  f.report(second, "completed");
  const json done = f.finished(run);
  EXPECT_EQ(done.value("state", ""), "completed") << done;
  EXPECT_EQ(done["steps"].size(), 3u) << done;
  EXPECT_EQ(f.experiments(), 2u) << "each step's experiment created once, by one of the two workers";
  EXPECT_EQ(f.created_audited(), 2);
}

}  // namespace
}  // namespace florch
