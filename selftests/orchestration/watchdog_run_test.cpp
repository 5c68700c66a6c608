// `faultctl run ... --slo-watchdog SERVICE --abort-burn-rate-5m N`: the SLO
// watchdog in the one run loop, reading a real Prometheus (Debian's
// `prometheus` with the slo:* recording rules) while a real syscall fault is on
// the test's cgroup. A blind watchdog refuses and nothing is injected; a
// healthy service lets the run complete; a burn rate above the limit ends it
// with exit 7 and records the burn rate at the abort (in the record's
// verdict.json too); a Prometheus stopped
// mid-run ends it too.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>

#include "enforce_env.h"
#include "orchestration_env.h"

namespace florch {
namespace {

using flenf::ChildProcess;
using flenf::json_event;
using flenf::json_events_named;
using flenf::TestCgroup;

class WatchdogRun : public flenf::EnforceTest {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(flenf::on_path("prometheus")) << "the prometheus server is not installed: scripts/install-deps.sh";
    prom_.emplace(slo_exposition("api", 0.5, 0.5, 0.9));
    std::string why;
    ASSERT_TRUE(prom_->ready(why)) << why;
    ASSERT_TRUE(prom_->wait_for("count(slo:burn_rate5m{service=\"api\"})", 1)) << "the rules did not record api";
    cg_.emplace(flenf::unique_name("wdog"));
  }
  void TearDown() override {
    cg_.reset();
    prom_.reset();
    EnforceTest::TearDown();
  }

  // A syscall fault on the test's cgroup (the cheapest fault to run), read by
  // the watchdog every second.
  std::vector<std::string> run_args(const std::string& service, const std::string& duration) const {
    return {flenf::kFaultctl,
            "run",
            "syscall",
            "--syscall",
            "connect",
            "--errno",
            "ECONNREFUSED",
            "--cgroup",
            cg_->relative(),
            "--duration",
            duration,
            "--json",
            "--prometheus-url",
            prom_->url(),
            "--slo-watchdog",
            service,
            "--abort-burn-rate-5m",
            "4",
            "--prometheus-interval",
            "1s"};
  }

  std::optional<SloPrometheus> prom_;
  std::optional<TestCgroup> cg_;
};

TEST_F(WatchdogRun, BlindRefusedHealthyCompletesBreachAndSilenceAbort) {
  // Blind: Prometheus has nothing of the service. Refused before the fault.
  auto blind = flenf::run(run_args("nothing-here", "10s"), 60s);
  EXPECT_TRUE(blind.status.is(1)) << blind.describe();
  EXPECT_NE(blind.err.find("the SLO watchdog's preflight refused it: blind_watchdog"), std::string::npos)
      << blind.describe();
  EXPECT_FALSE(json_event(blind.out, "started")) << "a blind watchdog let the fault start\n" << blind.describe();
  EXPECT_FALSE(json_event(blind.out, "slo_watchdog_outcome")) << "never armed, nothing to record";

  // Healthy: api burns 0.5x, the limit is 4. The run completes.
  auto healthy = flenf::run(run_args("api", "3s"), 60s);
  ASSERT_TRUE(healthy.status.is(0)) << healthy.describe();
  auto started = json_event(healthy.out, "started");
  ASSERT_TRUE(started) << healthy.describe();
  EXPECT_EQ((*started)["guardrail"]["slo_watchdog"]["service"], "api") << started->dump();
  EXPECT_EQ((*started)["guardrail"]["slo_watchdog"]["abort_burn_rate_5m"], 4) << started->dump();
  auto readings = json_events_named(healthy.out, "slo_watchdog");
  ASSERT_GE(readings.size(), 2u) << "a reading a second for 3s\n" << healthy.describe();
  for (const auto& e : readings) {
    EXPECT_EQ(e["healthy"], true) << e.dump();
    EXPECT_EQ(e["burn_rate_5m"], 0.5) << e.dump();
  }
  auto completed = json_event(healthy.out, "slo_watchdog_outcome");
  ASSERT_TRUE(completed) << healthy.describe();
  EXPECT_EQ((*completed)["outcome"], "completed") << completed->dump();
  EXPECT_FALSE(completed->contains("burn_rate_at_abort")) << completed->dump();

  // Breach: the burn rate moves to 12.5 mid-run. Exit 7, the burn rate recorded,
  // in the output and in the record's verdict.json.
  const std::string record = state_dir_ + "/record";
  std::vector<std::string> recorded = run_args("api", "60s");
  recorded.insert(recorded.end(), {"--record", record, "--steady-state", "1s", "--hypothesis", "api keeps its SLO"});
  ChildProcess breach = ChildProcess::spawn(recorded);
  ASSERT_TRUE(breach.wait_for("\"started\"", 30s)) << breach.describe();
  ASSERT_TRUE(breach.wait_for("\"burn_rate_5m\":0.5", 10s)) << breach.describe();
  prom_->set(slo_exposition("api", 12.5, 3, 0.8));
  ASSERT_TRUE(breach.wait_for("\"ended\"", 20s)) << breach.describe();
  auto e = breach.wait(30s);
  ASSERT_TRUE(e && e->is(7)) << breach.describe();
  auto ended = json_event(breach.out(), "ended");
  ASSERT_TRUE(ended) << breach.describe();
  EXPECT_EQ((*ended)["reason"], "guardrail") << ended->dump();
  EXPECT_EQ((*ended)["guardrail"], "slo watchdog") << ended->dump();
  EXPECT_NE(ended->value("detail", "").find("api burns its error budget 12.5x over 5m, above abort_burn_rate_5m 4"),
            std::string::npos)
      << ended->dump();
  auto aborted = json_event(breach.out(), "slo_watchdog_outcome");
  ASSERT_TRUE(aborted) << breach.describe();
  EXPECT_EQ((*aborted)["outcome"], "aborted") << aborted->dump();
  EXPECT_EQ((*aborted)["burn_rate_at_abort"], 12.5) << aborted->dump();
  std::ifstream verdict_file(record + "/verdict.json");
  ASSERT_TRUE(verdict_file) << "no verdict.json in " << record;
  auto verdict = nlohmann::json::parse(verdict_file, nullptr, false);
  ASSERT_FALSE(verdict.is_discarded()) << "verdict.json is not JSON";
  EXPECT_EQ(verdict["outcome"], "guardrail") << verdict.dump(2);
  EXPECT_EQ(verdict["guardrail_outcomes"]["slo watchdog"],
            (nlohmann::json{{"outcome", "aborted"}, {"burn_rate_at_abort", 12.5}}))
      << verdict.dump(2);
  auto verify = flenf::run({flenf::kFaultctl, "report", "--verify", record}, 30s);
  EXPECT_TRUE(verify.status.is(0)) << "the record with the watchdog's outcome must verify\n" << verify.describe();

  // Silence: Prometheus stopped mid-run. No failed query is tolerated.
  prom_->set(slo_exposition("api", 0.5, 0.5, 0.9));
  ASSERT_TRUE(prom_->wait_for("max(slo:burn_rate5m{service=\"api\"})", 0.5));
  ChildProcess silent = ChildProcess::spawn(run_args("api", "60s"));
  ASSERT_TRUE(silent.wait_for("\"started\"", 30s)) << silent.describe();
  ASSERT_TRUE(silent.wait_for("\"burn_rate_5m\":0.5", 10s)) << silent.describe();
  prom_->stop();
  ASSERT_TRUE(silent.wait_for("\"ended\"", 20s)) << silent.describe();
  auto s = silent.wait(30s);
  ASSERT_TRUE(s && s->is(7)) << "a watchdog that cannot see must not hold\n" << silent.describe();
  auto silent_end = json_event(silent.out(), "ended");
  ASSERT_TRUE(silent_end) << silent.describe();
  EXPECT_NE(silent_end->value("detail", "").find("Prometheus is silent on"), std::string::npos) << silent_end->dump();
  auto silent_outcome = json_event(silent.out(), "slo_watchdog_outcome");
  ASSERT_TRUE(silent_outcome) << silent.describe();
  EXPECT_EQ((*silent_outcome)["outcome"], "aborted") << silent_outcome->dump();
  EXPECT_TRUE((*silent_outcome)["burn_rate_at_abort"].is_null()) << silent_outcome->dump();
}

}  // namespace
}  // namespace florch
