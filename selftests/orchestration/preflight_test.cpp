// The watchdog's preflight on a real Prometheus: a blind watchdog refused by
// the series' name, the comparison verified on its known positive, a reading
// already past the limit refused, a series gone quiet left untested (never
// held), and abort_burn_rate_5m clamped to 2-10.
#include "userspace/orchestration/preflight.h"

#include <gtest/gtest.h>

#include "orchestration_env.h"

namespace florch {
namespace {

using faultline::ServiceSpec;

ServiceSpec named(const std::string& name) {
  ServiceSpec s;
  s.name = name;
  return s;
}

std::vector<std::string> codes(const faultline::PreflightResult& r) {
  std::vector<std::string> c;
  for (const auto& x : r.refusals) c.push_back(x.code);
  return c;
}

class Preflight : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(flenf::on_path("prometheus")) << "the prometheus server is not installed: scripts/install-deps.sh";
    prom_ = new SloPrometheus(kBase + slo_exposition("fading", 0.4, 0.4, 0.9));
    std::string why;
    ASSERT_TRUE(prom_->ready(why)) << why;
    for (const char* s : {"healthy", "hot", "fading"})
      ASSERT_TRUE(prom_->wait_for(std::string("count(slo:error_budget_remaining{service=\"") + s + "\"})", 1))
          << "the recording rules did not record " << s;
  }
  static void TearDownTestSuite() {
    delete prom_;
    prom_ = nullptr;
  }
  static inline const std::string kBase =
      slo_exposition("healthy", 0.25, 0.3, 0.9) + slo_exposition("hot", 3, 0.5, 0.8);
  static SloPrometheus* prom_;
};
SloPrometheus* Preflight::prom_ = nullptr;

TEST_F(Preflight, TheComparisonIsVerifiedOnItsKnownPositive) {
  auto q = prom_->client();
  auto r = faultline::watchdog_preflight(*q, named("healthy"), 2, 60);
  EXPECT_EQ(r.verdict, "ready") << r.to_json().dump(2);
  EXPECT_EQ(r.comparison, "verified");
  ASSERT_TRUE(r.reading);
  EXPECT_DOUBLE_EQ(*r.reading, 0.25);
  EXPECT_TRUE(r.refusals.empty());

  // The comparison itself, as the watchdog evaluates it.
  auto under = faultline::burn_rate_breaches(*q, named("healthy"), 0.2499);
  ASSERT_TRUE(under && *under);
  EXPECT_TRUE(**under) << "0.25 > 0.2499 breaches";
  auto over = faultline::burn_rate_breaches(*q, named("healthy"), 0.25);
  ASSERT_TRUE(over && *over);
  EXPECT_FALSE(**over) << "0.25 > 0.25 holds";
  auto none = faultline::burn_rate_breaches(*q, named("unscraped"), 0.1);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none) << "no series of the service: nothing to compare";
}

TEST_F(Preflight, AReadingPastTheLimitIsRefused) {
  auto q = prom_->client();
  auto r = faultline::watchdog_preflight(*q, named("hot"), 2, 60);
  EXPECT_EQ(r.verdict, "refused");
  EXPECT_EQ(codes(r), std::vector<std::string>{"breaches_as_set"}) << r.to_json().dump(2);
  EXPECT_EQ(r.comparison, "verified");
  // Raised to 10 it holds.
  auto r10 = faultline::watchdog_preflight(*q, named("hot"), 10, 60);
  EXPECT_EQ(r10.verdict, "ready") << r10.to_json().dump(2);
}

TEST_F(Preflight, ABlindWatchdogIsRefusedByTheSeriesName) {
  auto q = prom_->client();
  auto r = faultline::watchdog_preflight(*q, named("unscraped"), 3, 60);
  EXPECT_EQ(r.verdict, "refused");
  EXPECT_EQ(codes(r), (std::vector<std::string>{"blind_watchdog", "blind_watchdog", "blind_watchdog"}));
  ASSERT_EQ(r.refusals.size(), 3u);
  EXPECT_NE(r.refusals[0].message.find("slo:burn_rate5m{service=\"unscraped\"}"), std::string::npos)
      << r.refusals[0].message;
  EXPECT_NE(r.refusals[2].message.find("slo:error_budget_remaining{service=\"unscraped\"}"), std::string::npos);
  EXPECT_EQ(r.comparison, "untested");
  // Another label than the rules record: as blind.
  ServiceSpec other = named("healthy");
  other.slo.label = "job";
  EXPECT_EQ(faultline::watchdog_preflight(*q, other, 3, 60).verdict, "refused");
}

TEST_F(Preflight, ASeriesGoneQuietIsUntestedNeverHeld) {
  prom_->set(kBase);  // "fading" leaves the exporter: Prometheus marks it stale at the next scrape
  ASSERT_TRUE(prom_->wait_for("count(slo:burn_rate5m{service=\"fading\"}) or vector(0)", 0))
      << "the fading series did not go stale";
  auto q = prom_->client();
  auto r = faultline::watchdog_preflight(*q, named("fading"), 3, 120);
  EXPECT_EQ(r.verdict, "untested") << r.to_json().dump(2);
  EXPECT_EQ(r.comparison, "untested");
  EXPECT_TRUE(r.refusals.empty()) << "it had samples over the steady state";
  EXPECT_FALSE(r.reading);
}

TEST_F(Preflight, APrometheusThatDoesNotAnswerIsUnreadable) {
  auto down =
      faultline::prometheus_query("http://127.0.0.1:" + std::to_string(flenf::free_loopback_port()), 2'000'000'000ULL);
  ASSERT_TRUE(down);
  auto r = faultline::watchdog_preflight(**down, named("healthy"), 3, 60);
  EXPECT_EQ(r.verdict, "refused");
  for (const auto& x : r.refusals) EXPECT_EQ(x.code, "fact_unreadable") << x.message;
  EXPECT_FALSE(r.refusals.empty());
}

TEST(AbortBurnRate, ClampedToTwoToTen) {
  EXPECT_EQ(faultline::clamp_abort_burn_rate(0.5), 2);
  EXPECT_EQ(faultline::clamp_abort_burn_rate(2), 2);
  EXPECT_EQ(faultline::clamp_abort_burn_rate(6.5), 6.5);
  EXPECT_EQ(faultline::clamp_abort_burn_rate(50), 10);
  EXPECT_EQ(faultline::clamp_abort_burn_rate(std::nan("")), 2);
}

}  // namespace
}  // namespace florch
