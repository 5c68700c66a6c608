// Scenarios: the file read and checked whole (each bad field named, nothing
// run), and `faultctl scenario run` end to end as root: a real syscall fault on
// the test's cgroup, a wait, then the catalogue's cpu_stress_one on the same
// cgroup (its worker seen there) with a recorded hypothesis, aborted by the
// scenario's SLO watchdog when a real Prometheus shows the burn rate past its
// limit: exit 7, the last step never started, the cgroup left empty, and the
// step's record naming the template's SHA-256.
#include "userspace/orchestration/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "enforce_env.h"
#include "orchestration_env.h"

namespace florch {
namespace {

using flenf::ChildProcess;
using flenf::json_event;
using flenf::json_events_named;
using flenf::TestCgroup;
using nlohmann::json;

json syscall_step(const std::string& name, const std::string& cgroup, int seconds) {
  return {{"name", name},
          {"experiment",
           {{"kind", "syscall"},
            {"syscall", "connect"},
            {"errno", "ECONNREFUSED"},
            {"cgroup", cgroup},
            {"duration_sec", seconds}}}};
}

json cpu_step(const std::string& cgroup) {
  return {{"name", "cpu"},
          {"template", "cpu_stress_one"},
          {"params", {{"load", 20}, {"duration_s", 30}}},
          {"cgroup", cgroup}};
}

json scenario_doc(json steps) {
  return {{"kind", "Scenario"}, {"name", "checkout-s1"}, {"max_duration_s", 600}, {"steps", std::move(steps)}};
}

std::string scenario_error(const json& doc) {
  auto s = faultline::read_scenario(doc);
  if (const auto* e = std::get_if<faultline::SpecError>(&s)) return e->text();
  return "";
}

// A recorded step's steady state counts twice (before and after the fault),
// written as a duration ("1m") or as the deprecated whole seconds.
TEST(ScenarioFile, ARecordedStepsSteadyStateCountsTwiceInEitherSpelling) {
  const std::vector<std::pair<json, int64_t>> cases = {
      {{{"steady_state", "1m"}}, 30 + 2 * 60},
      {{{"steady_state_sec", 60}}, 30 + 2 * 60},
      {{{"steady_state", "1500ms"}}, 30 + 2 * 2},  // a started second counts whole
      {json::object(), 30},
  };
  for (const auto& [steady, planned] : cases) {
    json step = cpu_step("/fl-x");
    step["guardrails"] = {{"health_url", "http://127.0.0.1:9/healthz"}, {"hypothesis", "the service answers"}};
    for (const auto& item : steady.items()) step["guardrails"][item.key()] = item.value();
    const json doc = scenario_doc(json::array({step}));
    SCOPED_TRACE(doc.dump());
    auto s = faultline::read_scenario(doc);
    ASSERT_TRUE(std::holds_alternative<faultline::Scenario>(s)) << scenario_error(doc);
    EXPECT_EQ(std::get<faultline::Scenario>(s).planned_s(), planned);
  }
}

TEST(ScenarioFile, EachBadFieldIsNamed) {
  const json good = scenario_doc({syscall_step("errors", "/fl-x", 5), {{"wait_s", 2}}, cpu_step("/fl-x")});
  auto ok = faultline::read_scenario(good);
  ASSERT_TRUE(std::holds_alternative<faultline::Scenario>(ok)) << scenario_error(good);
  const auto& s = std::get<faultline::Scenario>(ok);
  ASSERT_EQ(s.steps.size(), 3u);
  EXPECT_EQ(s.planned_s(), 5 + 2 + 30);
  EXPECT_EQ(s.steps[2].tmpl->name, "cpu_stress_one");
  EXPECT_EQ(s.steps[2].spec["kind"], "cpu");
  EXPECT_TRUE(s.steps[1].is_wait());

  struct Row {
    json doc;
    std::string said;
  };
  auto with = [&](const std::function<void(json&)>& change) {
    json d = good;
    change(d);
    return d;
  };
  const std::vector<Row> rows = {
      {with([](json& d) { d["kind"] = "NetworkChaos"; }), "kind: must be \"Scenario\""},
      {with([](json& d) { d.erase("max_duration_s"); }), "max_duration_s: is required"},
      {with([](json& d) { d["max_duration_s"] = 30; }), "max_duration_s: the steps take 37 s, over the cap of 30 s"},
      {with([](json& d) { d["on_failure"] = "retry"; }), "on_failure: must be abort (the default) or continue"},
      {with([](json& d) { d["parallel"] = true; }), "parallel: not a field of a scenario"},
      {with([](json& d) { d["steps"] = json::array(); }), "steps: is required: a list of 1-100 steps"},
      {with([](json& d) { d["steps"][2]["params"]["load"] = 90; }), "steps[2].params.load: 90 is out of range 20-80"},
      {with([](json& d) { d["steps"][2]["template"] = "disk_fill_one"; }),
       "steps[2].template: 'disk_fill_one' is not a template"},
      {with([](json& d) { d["steps"][2].erase("cgroup"); }), "steps[2].cgroup: is required"},
      {with([](json& d) {
         d["steps"][2]["guardrails"] = {{"cores", 4}};
       }),
       "steps[2].guardrails.cores: not a guardrail field"},
      {with([](json& d) { d["steps"][0]["experiment"]["errno"] = "ENOTANERRNO"; }), "steps[0].experiment.errno"},
      {with([](json& d) { d["steps"][0]["experiment"].erase("duration_sec"); }), "steps[0].experiment.duration_sec"},
      {with([](json& d) { d["steps"][0]["params"] = json::object(); }), "steps[0].params: goes with a template step"},
      {with([](json& d) { d["steps"][1]["wait_s"] = 0; }), "steps[1].wait_s: must be 1-3600 seconds"},
      {with([](json& d) { d["steps"][1]["experiment"] = json::object(); }), "steps[1]: needs exactly one of"},
      {with([](json& d) { d["steps"][2]["name"] = "errors"; }), "steps[2].name: 'errors' names an earlier step too"},
      {with([](json& d) { d["steps"][2]["check"] = "http://x/"; }), "steps[2].check: not a field of a step"},
      {with([](json& d) {
         d["guardrails"] = {{"prometheus_url", "http://127.0.0.1:9"}, {"slo_watchdog", "api"}};
       }),
       "guardrails.abort_burn_rate_5m: is required"},
      {with([](json& d) {
         d["guardrails"] = {{"prometheus_url", "ftp://x"}, {"slo_watchdog", "api"}, {"abort_burn_rate_5m", 4}};
       }),
       "guardrails.prometheus_url: must be an http:// or https:// URL"},
      {with([](json& d) {
         d["steps"] = json::array({json{{"wait_s", 5}}});
       }),
       "steps: has no experiment or template"},
  };
  for (const auto& row : rows) {
    const std::string e = scenario_error(row.doc);
    EXPECT_NE(e.find(row.said), std::string::npos) << "expected: " << row.said << "\ngot: " << e;
  }
}

TEST(ScenarioFile, ValidateCommand) {
  const std::string base = "/tmp/" + flenf::unique_name("scen");
  const std::string good = base + "-good.json", bad = base + "-bad.json", broken = base + "-broken.json";
  json doc = scenario_doc({syscall_step("errors", "/fl-x", 5), cpu_step("/fl-x")});
  std::ofstream(good) << doc.dump(2);
  doc["steps"][1]["params"]["duration_s"] = 500;
  std::ofstream(bad) << doc.dump(2);
  std::ofstream(broken) << "{\"kind\": \"Scenario\",\n  \"steps\": [}";
  auto ok = flenf::run({flenf::kFaultctl, "scenario", "validate", good}, 30s);
  EXPECT_TRUE(ok.status.is(0)) << ok.describe();
  EXPECT_NE(ok.out.find("scenario checkout-s1 is valid: 2 step(s), 35 s planned of at most 600 s"), std::string::npos)
      << ok.describe();
  EXPECT_NE(ok.out.find("cpu_stress_one v1"), std::string::npos) << ok.describe();
  auto j = flenf::run({flenf::kFaultctl, "scenario", "validate", good, "--json"}, 30s);
  ASSERT_TRUE(j.status.is(0)) << j.describe();
  auto v = json::parse(j.out);
  EXPECT_EQ(v["steps"][1]["template_sha256"], faultline::find_template("cpu_stress_one")->sha256()) << j.out;
  auto out_of_range = flenf::run({flenf::kFaultctl, "scenario", "validate", bad}, 30s);
  EXPECT_TRUE(out_of_range.status.is(2)) << out_of_range.describe();
  EXPECT_NE(out_of_range.err.find(bad + ": steps[1].params.duration_s: 500 is out of range 30-120"), std::string::npos)
      << out_of_range.describe();
  auto not_json = flenf::run({flenf::kFaultctl, "scenario", "validate", broken}, 30s);
  EXPECT_TRUE(not_json.status.is(2)) << not_json.describe();
  EXPECT_NE(not_json.err.find("not JSON"), std::string::npos) << not_json.describe();
  EXPECT_NE(not_json.err.find("line 2"), std::string::npos) << not_json.describe();
  auto missing = flenf::run({flenf::kFaultctl, "scenario", "run", base + "-none.json", "--dry-run"}, 30s);
  EXPECT_TRUE(missing.status.is(2)) << missing.describe();
  auto flag = flenf::run({flenf::kFaultctl, "scenario", "validate", good, "--record", "/tmp/x"}, 30s);
  EXPECT_TRUE(flag.status.is(2)) << flag.describe();
  EXPECT_NE(flag.err.find("unknown flag '--record' for scenario validate"), std::string::npos) << flag.describe();
  for (const auto& f : {good, bad, broken}) std::filesystem::remove(f);
}

class ScenarioRun : public flenf::EnforceTest {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(flenf::on_path("prometheus")) << "the prometheus server is not installed: scripts/install-deps.sh";
    prom_.emplace(slo_exposition("api", 0.5, 0.5, 0.9));
    std::string why;
    ASSERT_TRUE(prom_->ready(why)) << why;
    ASSERT_TRUE(prom_->wait_for("count(slo:burn_rate5m{service=\"api\"})", 1)) << "the rules did not record api";
    cg_.emplace(flenf::unique_name("scen"));
    file_ = state_dir_ + "/scenario.json";
  }
  void TearDown() override {
    cg_.reset();
    prom_.reset();
    EnforceTest::TearDown();
  }

  std::optional<SloPrometheus> prom_;
  std::optional<TestCgroup> cg_;
  std::string file_;
};

TEST_F(ScenarioRun, StepsRunInOrderAndTheFirstAbortEndsTheScenario) {
  const std::string cg = cg_->relative();
  json cpu = cpu_step(cg);
  cpu["guardrails"] = {{"prometheus_url", prom_->url()},
                       {"query", "max(slo:burn_rate5m{service=\"api\"})"},
                       {"abort_above", 100},
                       {"interval_sec", 1},
                       {"hypothesis", "api keeps its SLO with one CPU loaded"},
                       {"steady_state_sec", 1}};
  json doc = scenario_doc({syscall_step("errors", cg, 2), {{"wait_s", 1}}, cpu, syscall_step("never", cg, 2)});
  doc["guardrails"] = {
      {"prometheus_url", prom_->url()}, {"slo_watchdog", "api"}, {"abort_burn_rate_5m", 4}, {"interval_s", 1}};
  std::ofstream(file_) << doc.dump(2);
  const std::string record = state_dir_ + "/records";

  ChildProcess run = flenf::spawn({flenf::kFaultctl, "scenario", "run", file_, "--json", "--record", record});
  ASSERT_TRUE(run.wait_for("\"name\":\"cpu\"", 60s)) << run.describe();
  // The second fault's "started" line is the cpu step's (the first was the syscall step's).
  auto started_lines = [&] {
    size_t n = 0;
    for (size_t at = 0; (at = run.out().find("\"event\":\"started\"", at)) != std::string::npos; ++at) ++n;
    return n;
  };
  for (int i = 0; i < 600 && started_lines() < 2 && run.running(); ++i) (void)run.wait_for("\x01", 100ms);
  ASSERT_EQ(started_lines(), 2u) << "the cpu step did not start\n" << run.describe();
  // The template's fault is real: its worker runs in the instance's cgroup.
  bool worker = false;
  for (int i = 0; i < 100 && !worker; ++i) {
    worker = !cg_->procs().empty();
    if (!worker) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(worker) << "no cpu worker in " << cg_->path() << "\n" << run.describe();
  ASSERT_TRUE(run.wait_for("\"burn_rate_5m\":0.5", 20s)) << run.describe();
  prom_->set(slo_exposition("api", 12.5, 3, 0.8));
  auto code = run.wait(60s);
  ASSERT_TRUE(code && code->is(7)) << "a watchdog's abort ends the scenario with 7\n" << run.describe();

  const std::string out = run.out();
  auto ended = json_events_named(out, "scenario_step_ended");
  ASSERT_EQ(ended.size(), 3u) << out;
  EXPECT_EQ(ended[0]["name"], "errors");
  EXPECT_EQ(ended[0]["exit_code"], 0) << ended[0].dump();
  EXPECT_EQ(ended[1]["wait_s"], 1) << ended[1].dump();
  EXPECT_EQ(ended[2]["name"], "cpu");
  EXPECT_EQ(ended[2]["exit_code"], 7) << ended[2].dump();
  EXPECT_EQ(ended[2]["outcome"], "aborted");
  EXPECT_EQ(ended[2]["template_sha256"], faultline::find_template("cpu_stress_one")->sha256());
  EXPECT_EQ(out.find("\"name\":\"never\""), std::string::npos) << "a step after the abort started\n" << out;
  auto summary = json_event(out, "scenario_ended");
  ASSERT_TRUE(summary) << out;
  EXPECT_EQ((*summary)["outcome"], "aborted") << summary->dump();
  EXPECT_EQ((*summary)["steps_run"], 3) << summary->dump();
  EXPECT_EQ((*summary)["exit_code"], 7) << summary->dump();
  auto outcome = json_events_named(out, "slo_watchdog_outcome");
  ASSERT_FALSE(outcome.empty()) << out;
  EXPECT_EQ(outcome.back()["outcome"], "aborted") << outcome.back().dump();
  EXPECT_EQ(outcome.back()["burn_rate_at_abort"], 12.5) << outcome.back().dump();

  // The fault is gone with the step, and the step's record names its template.
  for (int i = 0; i < 50 && !cg_->procs().empty(); ++i) std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(cg_->procs().empty()) << "the cpu worker outlived its step";
  std::ifstream h(record + "/03-cpu/hypothesis.json");
  ASSERT_TRUE(h) << "no record for the cpu step under " << record;
  auto hyp = json::parse(h, nullptr, false);
  ASSERT_FALSE(hyp.is_discarded());
  EXPECT_NE(hyp.value("command", "")
                .find("template cpu_stress_one v1 sha256 " + faultline::find_template("cpu_stress_one")->sha256()),
            std::string::npos)
      << hyp.dump(2);
  EXPECT_FALSE(std::filesystem::exists(record + "/01-errors")) << "a step without a hypothesis records nothing";
}

TEST_F(ScenarioRun, OnFailureContinueRunsOnAfterAFailedStep) {
  const std::string cg = cg_->relative();
  // A cgroup that does not exist is refused when the step is applied (exit 2,
  // nothing applied): the file checks, since the cgroup is the host's.
  json doc = scenario_doc({syscall_step("gone", cg + "-gone", 2), syscall_step("after", cg, 1)});
  doc["on_failure"] = "continue";
  std::ofstream(file_) << doc.dump(2);
  auto r = flenf::run({flenf::kFaultctl, "scenario", "run", file_, "--json"}, 60s);
  EXPECT_TRUE(r.status.is(2)) << "the first step that did not complete gives the exit code\n" << r.describe();
  auto ended = json_events_named(r.out, "scenario_step_ended");
  ASSERT_EQ(ended.size(), 2u) << r.describe();
  EXPECT_EQ(ended[0]["outcome"], "bad-input") << ended[0].dump();
  EXPECT_EQ(ended[1]["exit_code"], 0) << ended[1].dump();

  doc["on_failure"] = "abort";
  std::ofstream(file_) << doc.dump(2);
  auto stop = flenf::run({flenf::kFaultctl, "scenario", "run", file_, "--json"}, 60s);
  EXPECT_TRUE(stop.status.is(2)) << stop.describe();
  EXPECT_EQ(json_events_named(stop.out, "scenario_step_ended").size(), 1u) << stop.describe();
}

}  // namespace
}  // namespace florch
