// Schedules on faultcp, both backends: bad cron and zones named by field, the
// routes (create, list, get, enable/disable, delete, firings), and the worker
// on a six-field (seconds) cron: no overlap (a firing while the previous run
// goes on is skipped `overlap`), every firing judged as a manual run is
// (kill_switch, not_opted_in), a scenario or a step; missed firings while
// faultcp was down recorded once as `missed` (SQLite, killed and restarted);
// and at most once per firing with two replicas on PostgreSQL.
#include <gtest/gtest.h>

#include <csignal>
#include <set>
#include <thread>

#include "cp_client.h"
#include "cp_fleet.h"
#include "selftests/lib/child_process.h"

namespace florch {
namespace schedule_tests {

using fltest::Backend;
using fltest::CpReply;
using nlohmann::json;
using namespace std::chrono_literals;

json loss_experiment(int seconds) {
  return {{"kind", "loss"}, {"target", "10.0.0.1"}, {"percent", 10}, {"duration_sec", seconds}};
}

// One workspace with one agent on `port`; the test is the agent.
// The workspace's fleet, with the schedules' routes.
struct Workspace : CpFleet {
  json firings(int64_t schedule) const {
    return call("GET", "/v1/schedules/" + std::to_string(schedule) + "/firings").json()["firings"];
  }
  // Waits until `pred` holds of the firings (newest first); them.
  template <typename Pred>
  json firings_until(int64_t schedule, Pred pred, std::chrono::milliseconds within = 10s) const {
    const auto until = std::chrono::steady_clock::now() + within;
    json f;
    while (std::chrono::steady_clock::now() < until) {
      f = firings(schedule);
      if (f.is_array() && pred(f)) return f;
      std::this_thread::sleep_for(50ms);
    }
    return f;
  }
  int64_t schedule(const json& body) const {
    auto r = call("POST", "/v1/schedules", body.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    return r.json().value("id", int64_t{0});
  }
};

Workspace join(uint16_t port, const std::string& name) { return Workspace{cp_signup(port, name)}; }

size_t count_code(const json& firings, const std::string& code) {
  size_t n = 0;
  for (const auto& f : firings) n += f.value("code", json()).is_string() && f["code"] == code ? 1 : 0;
  return n;
}

size_t count_started(const json& firings) {
  size_t n = 0;
  for (const auto& f : firings) n += f.value("status", "") == "started" ? 1 : 0;
  return n;
}

// Every firing's due time once (the table's unique key says so too).
void expect_each_due_once(const json& firings) {
  std::set<int64_t> seen;
  for (const auto& f : firings) EXPECT_TRUE(seen.insert(f.value("due_ms", int64_t{0})).second) << f;
}

class SchedulesApi : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    auto config = fltest::test_config();
    config.scenario_tick = 100ms;
    config.schedule_tick = 100ms;
    server_ = std::make_unique<fltest::CpServer>(GetParam(), config);
    ws_ = join(server_->port(), "acme");
  }
  json every_second_step(const std::string& name, const json& step) const {
    return {{"name", name}, {"cron", "* * * * * *"}, {"timezone", "UTC"}, {"agent_id", ws_.agent}, {"step", step}};
  }
  std::unique_ptr<fltest::CpServer> server_;
  Workspace ws_;
};

TEST_P(SchedulesApi, BadSchedulesAreRefusedNamingTheField) {
  json good{{"name", "nightly"},
            {"cron", "0 3 * * *"},
            {"timezone", "Europe/Paris"},
            {"agent_id", ws_.agent},
            {"step", {{"experiment", loss_experiment(5)}}}};
  struct Row {
    json patch;
    int status;
    std::string field, says;
  };
  const std::vector<Row> rows = {
      {{{"cron", "60 3 * * *"}}, 400, "cron", "minute: \"60\" is out of range 0-59"},
      {{{"cron", "0 3 * *"}}, 400, "cron", "4 fields"},
      {{{"cron", "0 3 * * funday"}}, 400, "cron", "day_of_week"},
      {{{"cron", "0 0 30 2 *"}}, 400, "cron", "day_of_month"},
      {{{"cron", "@reboot"}}, 400, "cron", "not a macro"},
      {{{"timezone", "Mars/Olympus"}}, 400, "timezone", "\"Mars/Olympus\" is not a time zone"},
      {{{"timezone", "../../etc/passwd"}}, 400, "timezone", "not a time zone"},
      {{{"name", "Bad Name"}}, 400, "name", "1-63"},
      {{{"agent_id", 999}}, 404, "agent_id", "no such agent"},
      {{{"scenario_id", 1}}, 400, "scenario_id", "exactly one"},
      {{{"step", {{"wait_s", 5}}}}, 400, "step", "a wait"},
      {{{"step", {{"template", "cpu_stress_one"}, {"params", {{"load", 99}, {"duration_s", 30}}}, {"cgroup", "/a"}}}},
       400,
       "step.params.load",
       "out of range"},
      {{{"colour", "blue"}}, 400, "colour", ""},
  };
  for (const auto& row : rows) {
    json body = good;
    body.update(row.patch);
    auto r = ws_.call("POST", "/v1/schedules", body.dump());
    EXPECT_EQ(r.status, row.status) << row.patch << ": " << r.body;
    EXPECT_EQ(r.json().value("field", ""), row.field) << row.patch << ": " << r.body;
    EXPECT_NE(r.json().value("error", "").find(row.says), std::string::npos) << row.patch << ": " << r.body;
  }
  json neither = good;
  neither.erase("step");
  auto r = ws_.call("POST", "/v1/schedules", neither.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json().value("field", ""), "scenario_id");
  json unknown_scenario = neither;
  unknown_scenario["scenario_id"] = 77;
  EXPECT_EQ(ws_.call("POST", "/v1/schedules", unknown_scenario.dump()).status, 404);
  EXPECT_EQ(ws_.call("GET", "/v1/schedules").json()["schedules"].size(), 0u) << "nothing stored";
}

TEST_P(SchedulesApi, CreateListGetDisableEnableDelete) {
  const json body{{"name", "nightly"},
                  {"cron", "30 2 * * *"},
                  {"timezone", "Europe/Paris"},
                  {"agent_id", ws_.agent},
                  {"step", {{"experiment", loss_experiment(5)}}}};
  auto created = ws_.call("POST", "/v1/schedules", body.dump());
  ASSERT_EQ(created.status, 201) << created.describe();
  const json s = created.json();
  const int64_t id = s.value("id", int64_t{0});
  EXPECT_EQ(s.value("enabled", false), true);
  ASSERT_TRUE(s["next_due_ms"].is_number()) << s;
  const std::string next_due = s.value("next_due", "");
  EXPECT_NE(next_due.find("T02:30:00+0"), std::string::npos) << "local time in the zone, with its offset: " << s;
  const int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  EXPECT_GT(s["next_due_ms"].get<int64_t>(), now);
  EXPECT_LE(s["next_due_ms"].get<int64_t>(), now + 25 * 3600 * 1000) << "within a day (and a DST hour)";
  EXPECT_EQ(ws_.call("POST", "/v1/schedules", body.dump()).status, 409) << "the name is taken";
  EXPECT_EQ(ws_.call("GET", "/v1/schedules").json()["schedules"].size(), 1u);
  EXPECT_EQ(ws_.call("GET", "/v1/schedules/" + std::to_string(id)).json().value("cron", ""), "30 2 * * *");

  auto off = ws_.call("PATCH", "/v1/schedules/" + std::to_string(id), R"({"enabled":false})");
  ASSERT_EQ(off.status, 200) << off.describe();
  EXPECT_EQ(off.json().value("enabled", true), false);
  EXPECT_TRUE(off.json()["next_due_ms"].is_null()) << off.body;
  auto on = ws_.call("PATCH", "/v1/schedules/" + std::to_string(id), R"({"enabled":true})");
  ASSERT_EQ(on.status, 200) << on.describe();
  EXPECT_EQ(on.json()["next_due_ms"], s["next_due_ms"]) << on.body;
  auto bad = ws_.call("PATCH", "/v1/schedules/" + std::to_string(id), R"({"enabled":"yes"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json().value("field", ""), "enabled");
  EXPECT_EQ(ws_.call("PATCH", "/v1/schedules/999", R"({"enabled":true})").status, 404);
  EXPECT_EQ(ws_.firings(id).size(), 0u);

  EXPECT_EQ(ws_.call("DELETE", "/v1/schedules/" + std::to_string(id)).status, 200);
  EXPECT_EQ(ws_.call("GET", "/v1/schedules/" + std::to_string(id)).status, 404);
  EXPECT_EQ(ws_.call("GET", "/v1/schedules/" + std::to_string(id) + "/firings").status, 404);
  EXPECT_EQ(ws_.call("DELETE", "/v1/schedules/" + std::to_string(id)).status, 404);
}

// Every second, a 30 s experiment the agent holds: the first firing starts
// it, the next ones are skipped `overlap`; once it ends, a firing starts again.
TEST_P(SchedulesApi, NoOverlapAFiringWhileThePreviousRunGoesOnIsSkipped) {
  const int64_t id = ws_.schedule(every_second_step("often", {{"experiment", loss_experiment(30)}}));
  const int64_t first = ws_.take(5000);
  ASSERT_NE(first, 0) << "the first firing's experiment reaches the agent";
  json f = ws_.firings_until(id, [](const json& f) { return count_code(f, "overlap") >= 2; });
  ASSERT_GE(count_code(f, "overlap"), 2u) << f;
  EXPECT_EQ(count_started(f), 1u) << f;
  EXPECT_EQ(ws_.experiments(), 1u);
  const json& oldest = f.back();
  EXPECT_EQ(oldest.value("status", ""), "started") << f;
  EXPECT_EQ(oldest.value("experiment_id", int64_t{0}), first) << f;
  for (const auto& x : f)
    if (x.value("code", json()) == "overlap")
      EXPECT_NE(x.value("detail", "").find("experiment " + std::to_string(first)), std::string::npos) << x;
  expect_each_due_once(f);

  ws_.report(first, "completed");
  const int64_t second = ws_.take(5000);
  ASSERT_NE(second, 0) << "a firing after the run ended starts again";
  EXPECT_NE(second, first);
  f = ws_.firings(id);
  EXPECT_EQ(count_started(f), 2u) << f;
  EXPECT_EQ(ws_.experiments(), 2u);

  // Disabled: no firing after the answer.
  ASSERT_EQ(ws_.call("PATCH", "/v1/schedules/" + std::to_string(id), R"({"enabled":false})").status, 200);
  const size_t n = ws_.firings(id).size();
  std::this_thread::sleep_for(1500ms);  // at least one due time passes while it is off
  EXPECT_EQ(ws_.firings(id).size(), n) << "a disabled schedule does not fire";
}

TEST_P(SchedulesApi, EveryFiringIsJudgedKillSwitchAndValidator) {
  // A template step on an instance no registered service has: not_opted_in.
  const json tmpl{
      {"template", "cpu_stress_one"}, {"params", {{"load", 20}, {"duration_s", 30}}}, {"cgroup", "/app.slice/a"}};
  const int64_t refused = ws_.schedule(every_second_step("tmpl", tmpl));
  json f = ws_.firings_until(refused, [](const json& f) { return f.size() >= 2; });
  ASSERT_GE(f.size(), 2u) << f;
  EXPECT_EQ(count_code(f, "not_opted_in"), f.size()) << f;
  for (const auto& x : f) EXPECT_EQ(x.value("status", ""), "skipped") << x;
  ASSERT_EQ(ws_.call("DELETE", "/v1/schedules/" + std::to_string(refused)).status, 200);

  ASSERT_EQ(ws_.call("POST", "/v1/kill").status, 200);
  const int64_t killed = ws_.schedule(every_second_step("killed", {{"experiment", loss_experiment(5)}}));
  f = ws_.firings_until(killed, [](const json& f) { return f.size() >= 2; });
  ASSERT_GE(f.size(), 2u) << f;
  EXPECT_EQ(count_code(f, "kill_switch"), f.size()) << f;
  EXPECT_EQ(ws_.experiments(), 0u) << "nothing dispatched";
}

TEST_P(SchedulesApi, AScenarioScheduleStartsOneRunAndSkipsWhileItRuns) {
  const json scenario{{"kind", "Scenario"},
                      {"name", "nightly"},
                      {"max_duration_s", 600},
                      {"steps", json::array({{{"name", "a"}, {"experiment", loss_experiment(30)}}})}};
  auto sc = ws_.call("POST", "/v1/scenarios", scenario.dump());
  ASSERT_EQ(sc.status, 201) << sc.describe();
  const int64_t id = ws_.schedule({{"name", "nightly-run"},
                                   {"cron", "*/1 * * * * *"},
                                   {"timezone", "Europe/Paris"},
                                   {"agent_id", ws_.agent},
                                   {"scenario_id", sc.json()["id"]}});
  const int64_t exp = ws_.take(5000);
  ASSERT_NE(exp, 0) << "the run's first step reaches the agent";
  json f = ws_.firings_until(id, [](const json& f) { return count_code(f, "overlap") >= 1; });
  ASSERT_GE(count_code(f, "overlap"), 1u) << f;
  ASSERT_EQ(count_started(f), 1u) << f;
  const int64_t run = f.back().value("scenario_run_id", int64_t{0});
  ASSERT_NE(run, 0) << f;
  const json r = ws_.call("GET", "/v1/scenario-runs/" + std::to_string(run)).json();
  EXPECT_EQ(r.value("state", ""), "running") << r;
  EXPECT_EQ(r.value("created_by", ""), "schedule:" + std::to_string(id)) << r;
  EXPECT_EQ(ws_.call("GET", "/v1/scenario-runs").json()["runs"].size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, SchedulesApi, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

struct Process {
  fltest::ChildProcess child;
  uint16_t port = 0;
};

Process start_faultcp(const std::string& url, const std::string& grace_s = "60") {
  auto cp = fltest::ChildProcess::spawn(
      {FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database", url, "--schedule-grace-s", grace_s});
  auto line = cp.wait_line_starting("faultcp: listening on", 20s);
  if (!line) ADD_FAILURE() << cp.describe();
  const auto at = line ? line->find("127.0.0.1:") : std::string::npos;
  const uint16_t port = at == std::string::npos ? 0 : static_cast<uint16_t>(std::stoul(line->substr(at + 10)));
  return Process{std::move(cp), port};
}

void kill9(Process& p) {
  p.child.signal(SIGKILL);
  auto st = p.child.wait(5s);
  ASSERT_TRUE(st && st->killed_by(SIGKILL)) << p.child.describe();
}

// faultcp down for 7 s with a grace of 3 s: the firings due meanwhile are one
// `missed` row (not made up), then the schedule fires on.
TEST(ScheduleResume, MissedFiringsWhileDownAreRecordedOnceAndNotMadeUp) {
  fltest::TestDatabase db(Backend::Sqlite);
  auto a = start_faultcp(db.url(), "3");
  ASSERT_NE(a.port, 0);
  Workspace w = join(a.port, "missed");
  const int64_t id = w.schedule({{"name", "often"},
                                 {"cron", "* * * * * *"},
                                 {"timezone", "UTC"},
                                 {"agent_id", w.agent},
                                 {"step", {{"experiment", loss_experiment(30)}}}});
  ASSERT_NE(w.take(5000), 0);
  kill9(a);
  std::this_thread::sleep_for(7s);  // the downtime itself: nothing to poll
  auto b = start_faultcp(db.url(), "3");
  ASSERT_NE(b.port, 0);
  w.port = b.port;
  json f =
      w.firings_until(id, [](const json& f) { return count_code(f, "missed") == 1 && count_code(f, "overlap") >= 1; });
  ASSERT_EQ(count_code(f, "missed"), 1u) << f;
  int64_t missed_count = 0, missed_due = 0;
  for (const auto& x : f)
    if (x.value("code", json()) == "missed") {
      missed_count = x.value("missed", int64_t{0});
      missed_due = x.value("due_ms", int64_t{0});
      EXPECT_NE(x.value("detail", "").find("not made up"), std::string::npos) << x;
    }
  EXPECT_GE(missed_count, 2) << f;
  for (const auto& x : f)
    if (x.value("code", json()) == "overlap") EXPECT_GT(x.value("due_ms", int64_t{0}), missed_due) << f;
  EXPECT_EQ(count_started(f), 1u) << "nothing made up: " << f;
  EXPECT_EQ(w.experiments(), 1u);
  expect_each_due_once(f);
}

// Two replicas on one PostgreSQL database, both workers firing an
// every-second schedule whose experiments the agent completes at once: each
// due time is recorded once and started once; one replica killed, the other
// goes on.
TEST(ScheduleResume, TwoReplicasOnPostgresFireEachDueTimeOnce) {
  fltest::TestDatabase db(Backend::Postgres);
  auto a = start_faultcp(db.url());
  auto b = start_faultcp(db.url());
  ASSERT_NE(a.port, 0);
  ASSERT_NE(b.port, 0);
  Workspace w = join(a.port, "pair");
  const int64_t id = w.schedule({{"name", "often"},
                                 {"cron", "* * * * * *"},
                                 {"timezone", "UTC"},
                                 {"agent_id", w.agent},
                                 {"step", {{"experiment", loss_experiment(5)}}}});
  int64_t taken = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t e = w.take(5000);
    ASSERT_NE(e, 0);
    w.report(e, "completed");
    ++taken;
  }
  kill9(a);
  w.port = b.port;
  for (int i = 0; i < 2; ++i) {
    const int64_t e = w.take(5000);
    ASSERT_NE(e, 0) << "replica B fires on";
    w.report(e, "completed");
    ++taken;
  }
  ASSERT_EQ(w.call("PATCH", "/v1/schedules/" + std::to_string(id), R"({"enabled":false})").status, 200);
  const json f = w.firings(id);
  expect_each_due_once(f);
  size_t with_experiment = 0;
  std::set<int64_t> experiments;
  for (const auto& x : f)
    if (x["experiment_id"].is_number()) {
      ++with_experiment;
      experiments.insert(x["experiment_id"].get<int64_t>());
    }
  EXPECT_EQ(with_experiment, experiments.size()) << "one experiment per started firing: " << f;
  EXPECT_EQ(w.experiments(), experiments.size()) << "no experiment without its firing";
  EXPECT_GE(static_cast<int64_t>(experiments.size()), taken);
}

}  // namespace schedule_tests
}  // namespace florch
