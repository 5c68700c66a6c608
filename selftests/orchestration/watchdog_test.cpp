// The SLO watchdog guardrail on a real Prometheus: armed only when its
// preflight is ready, healthy under the limit, a breach above it that records
// the burn rate at the abort, and a Prometheus that falls silent aborting.
#include "userspace/orchestration/watchdog.h"

#include <gtest/gtest.h>

#include "orchestration_env.h"

namespace florch {
namespace {

faultline::SloWatchdogConfig watchdog_for(const std::string& service, double limit) {
  faultline::SloWatchdogConfig c;
  c.service.name = service;
  c.abort_burn_rate_5m = limit;
  c.steady_state_s = 60;
  return c;
}

TEST(SloWatchdog, AbortsAboveTheLimitAndWhenPrometheusFallsSilent) {
  ASSERT_TRUE(flenf::on_path("prometheus")) << "the prometheus server is not installed: scripts/install-deps.sh";
  SloPrometheus prom(slo_exposition("api", 0.5, 0.5, 0.9));
  std::string why;
  ASSERT_TRUE(prom.ready(why)) << why;
  ASSERT_TRUE(prom.wait_for("count(slo:burn_rate5m{service=\"api\"})", 1)) << "the rules did not record api";
  std::shared_ptr<faultline::InstantQuery> q = prom.client();

  // Blind: a service Prometheus has nothing of is refused at arm().
  faultline::SloWatchdog blind(q, watchdog_for("nothing-here", 3));
  auto armed_blind = blind.arm();
  ASSERT_FALSE(armed_blind.ok());
  EXPECT_NE(armed_blind.error().message.find("blind_watchdog"), std::string::npos) << armed_blind.error().message;

  faultline::SloWatchdog w(q, watchdog_for("api", 50));
  EXPECT_EQ(w.limit(), 10) << "clamped to 10";
  ASSERT_TRUE(w.arm().ok());
  ASSERT_TRUE(w.preflight());
  EXPECT_EQ(w.preflight()->comparison, "verified");
  auto ok = faultline::read_named(w);
  EXPECT_TRUE(ok.healthy) << ok.problem;
  EXPECT_DOUBLE_EQ(ok.values.at("burn_rate_5m"), 0.5);
  EXPECT_EQ(w.outcome_json(), (nlohmann::json{{"outcome", "completed"}}));

  // One whose fault has ended: later readings (a record's after window) say
  // unhealthy but no longer change its outcome.
  faultline::SloWatchdog after(q, watchdog_for("api", 2));
  ASSERT_TRUE(after.arm().ok());
  after.fault_ended();

  prom.set(slo_exposition("api", 12.5, 3, 0.8));
  ASSERT_TRUE(prom.wait_for("max(slo:burn_rate5m{service=\"api\"})", 12.5)) << "the burn rate did not move";
  auto breach = faultline::read_named(w);
  EXPECT_FALSE(breach.healthy);
  EXPECT_NE(breach.problem.find("slo watchdog"), std::string::npos) << breach.problem;
  EXPECT_NE(breach.problem.find("12.5x over 5m, above abort_burn_rate_5m 10"), std::string::npos) << breach.problem;
  EXPECT_EQ(w.outcome_json(), (nlohmann::json{{"outcome", "aborted"}, {"burn_rate_at_abort", 12.5}}));
  // The first breach is the one recorded, not a later reading.
  (void)faultline::read_named(w);
  EXPECT_EQ(w.outcome_json()["burn_rate_at_abort"], 12.5);

  EXPECT_FALSE(faultline::read_named(after).healthy);
  EXPECT_EQ(after.outcome(), (nlohmann::json{{"outcome", "completed"}}));

  // Already past its limit when armed: refused, the run would abort at once.
  faultline::SloWatchdog late(q, watchdog_for("api", 4));
  auto armed_late = late.arm();
  ASSERT_FALSE(armed_late.ok());
  EXPECT_NE(armed_late.error().message.find("breaches_as_set"), std::string::npos) << armed_late.error().message;

  // Silent: Prometheus stopped. A fresh watchdog (armed while it answered) aborts.
  prom.set(slo_exposition("api", 0.5, 0.5, 0.9));
  ASSERT_TRUE(prom.wait_for("max(slo:burn_rate5m{service=\"api\"})", 0.5));
  faultline::SloWatchdog s(q, watchdog_for("api", 2));
  ASSERT_TRUE(s.arm().ok());
  prom.stop();
  auto silent = faultline::read_named(s);
  EXPECT_FALSE(silent.healthy);
  EXPECT_NE(silent.problem.find("silent"), std::string::npos) << silent.problem;
  EXPECT_EQ(s.outcome_json(), (nlohmann::json{{"outcome", "aborted"}, {"burn_rate_at_abort", nullptr}}));
  EXPECT_EQ(s.event(silent)["healthy"], false);
}

}  // namespace
}  // namespace florch
