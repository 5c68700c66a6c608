// The guardrail flags every `faultctl run` shares (ctl/run_flags.h), parsed
// alone: Prometheus, SLO burn rate, health over https, the kernel signal's
// source, several guardrails at once, which guardrail each limit belongs to, and
// the orchestration's --slo-watchdog.
#include <gtest/gtest.h>

#include "ctl/flag_words.h"
#include "ctl/run_flags.h"

namespace faultline {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ULL;

Result<RunFlags> parse(const std::vector<std::string>& args) {
  cxxopts::Options o("faultctl run", "");
  add_run_options(o);
  auto r = parse_flag_words(o, args);
  if (!r) return r.error();
  return parse_run_flags(*r, "", 60 * kSecond, args);
}

TEST(GuardrailFlags, PrometheusQueryWithDefaults) {
  auto f = parse(
      {"--prometheus-url", "http://127.0.0.1:9090", "--query", "sum(rate(errors_total[1m]))", "--abort-above", "5"});
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_TRUE(f->guardrails.prometheus);
  const auto& p = *f->guardrails.prometheus;
  EXPECT_EQ(p.query, "sum(rate(errors_total[1m]))");
  EXPECT_EQ(p.abort_above, 5);
  EXPECT_FALSE(p.abort_below);
  EXPECT_EQ(p.polling.interval_ns, 5 * kSecond) << "Prometheus is asked every 5s unless told";
  EXPECT_EQ(p.polling.query_errors, 3);
  EXPECT_FALSE(f->guardrails.health);
}

TEST(GuardrailFlags, IntervalIsSharedUnlessPrometheusHasItsOwn) {
  auto both = parse({"--health-url", "http://h/", "--prometheus-url", "http://p:9090", "--query", "up", "--abort-below",
                     "1", "--interval", "1s"});
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_EQ(both->guardrails.health->interval_ns, kSecond);
  EXPECT_EQ(both->guardrails.prometheus->polling.interval_ns, kSecond);
  auto own = parse({"--health-url", "http://h/", "--prometheus-url", "http://p:9090", "--query", "up", "--abort-below",
                    "1", "--interval", "1s", "--prometheus-interval", "15s", "--query-errors", "0"});
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_EQ(own->guardrails.health->interval_ns, kSecond);
  EXPECT_EQ(own->guardrails.prometheus->polling.interval_ns, 15 * kSecond);
  EXPECT_EQ(own->guardrails.prometheus->polling.query_errors, 0);
}

TEST(GuardrailFlags, EachLimitBelongsToTheGuardrailBeforeIt) {
  auto f = parse({"--kernel-signal", "tcp_resets", "--abort-above", "50", "--prometheus-url", "http://p:9090",
                  "--query", "avail", "--abort-below", "0.99", "--abort-above=1.5", "--slo-burn-rate",
                  "ratio_rate{window}", "--abort-above", "14.4", "--slo-target", "99.9"});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->guardrails.kernel_signal->abort_above, 50);
  EXPECT_EQ(f->guardrails.prometheus->abort_below, 0.99);
  EXPECT_EQ(f->guardrails.prometheus->abort_above, 1.5);
  EXPECT_EQ(f->guardrails.burn_rate->abort_above, 14.4);
  EXPECT_EQ(f->guardrails.burn_rate->slo_target, 99.9);
  // One thresholded guardrail: its limit may come first, as it always could.
  auto alone = parse({"--abort-above", "3", "--kernel-signal", "tcp_retransmits"});
  ASSERT_TRUE(alone.ok()) << alone.error().message;
  EXPECT_EQ(alone->guardrails.kernel_signal->abort_above, 3);
}

TEST(GuardrailFlags, BurnRateWindowsAndTwoQueries) {
  auto f = parse({"--prometheus-url", "https://prom.example:9090/prometheus/", "--slo-burn-rate",
                  "job:slo_errors_per_request:ratio_rate{window}", "--abort-above", "14.4", "--burn-windows", "5m,1h",
                  "--slo-target", "99.9%"});
  ASSERT_TRUE(f.ok()) << f.error().message;
  const auto& b = *f->guardrails.burn_rate;
  EXPECT_EQ(b.fast_query(), "job:slo_errors_per_request:ratio_rate5m");
  EXPECT_EQ(b.slow_query(), "job:slo_errors_per_request:ratio_rate1h");
  auto two = parse({"--prometheus-url", "http://p:9090", "--slo-burn-rate", "burn:fast", "--slo-burn-rate", "burn:slow",
                    "--abort-above", "6"});
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_EQ(two->guardrails.burn_rate->fast_query(), "burn:fast");
  EXPECT_EQ(two->guardrails.burn_rate->slow_query(), "burn:slow");
  EXPECT_FALSE(two->guardrails.burn_rate->slo_target);
}

TEST(GuardrailFlags, HttpsHealthWithACaAndTheSignalSource) {
  auto f = parse({"--health-url", "https://localhost:8443/health", "--health-ca", "/etc/hostname", "--kernel-signal",
                  "tcp_retransmits", "--abort-above", "5", "--signal-source", "procfs"});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->guardrails.health->ca_file, "/etc/hostname");
  EXPECT_EQ(f->guardrails.kernel_signal->source, SignalSource::Procfs);
}

TEST(GuardrailFlags, ARecordReadsAtTheShortestInterval) {
  auto f = parse({"--prometheus-url", "http://p:9090", "--query", "up", "--abort-below", "1", "--kernel-signal",
                  "tcp_resets", "--abort-above", "5", "--steady-state", "1s"});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->guardrails.record_interval_ns(), kSecond);
}

TEST(GuardrailFlags, SloWatchdogWithItsIntervalAndAlongAQuery) {
  auto f = parse({"--prometheus-url", "http://p:9090", "--slo-watchdog", "checkout", "--abort-burn-rate-5m", "14.4"});
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_TRUE(f->slo_watchdog);
  EXPECT_EQ(f->slo_watchdog->service, "checkout");
  EXPECT_EQ(f->slo_watchdog->abort_burn_rate_5m, 14.4) << "as written; the watchdog clamps it";
  EXPECT_EQ(f->slo_watchdog->prometheus.url, "http://p:9090");
  EXPECT_EQ(f->slo_watchdog->interval_ns, 10 * kSecond);
  EXPECT_FALSE(f->guardrails.any()) << "the watchdog alone";

  auto both = parse({"--prometheus-url", "http://p:9090", "--query", "up", "--abort-below", "1", "--slo-watchdog",
                     "api", "--abort-burn-rate-5m", "3", "--prometheus-interval", "2s"});
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_EQ(both->slo_watchdog->interval_ns, 2 * kSecond);
  EXPECT_EQ(both->guardrails.prometheus->abort_below, 1);
  EXPECT_FALSE(parse({"--slo-watchdog", "api", "--abort-burn-rate-5m", "3"}).ok());
}

struct Bad {
  std::vector<std::string> args;
  const char* expect;
};

class GuardrailFlagsBad : public ::testing::TestWithParam<Bad> {};

TEST_P(GuardrailFlagsBad, NamesTheProblem) {
  auto f = parse(GetParam().args);
  ASSERT_FALSE(f.ok()) << "accepted";
  EXPECT_TRUE(f.error().bad_input);
  EXPECT_NE(f.error().message.find(GetParam().expect), std::string::npos) << f.error().message;
}

const std::vector<std::string> kProm = {"--prometheus-url", "http://p:9090"};
std::vector<std::string> prom(std::vector<std::string> more) {
  std::vector<std::string> v = kProm;
  v.insert(v.end(), more.begin(), more.end());
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GuardrailFlagsBad,
    ::testing::Values(
        Bad{{"--query", "up", "--abort-below", "1"}, "give --prometheus-url too"},
        Bad{{"--prometheus-url", "http://p:9090"}, "needs something to ask"},
        Bad{{"--query-errors", "2"}, "give --prometheus-url too"},
        Bad{prom({"--query", "up"}), "--query needs --abort-above X or --abort-below X"},
        Bad{prom({"--query", "up", "--abort-above", "2", "--abort-above", "3"}), "takes one --abort-above"},
        Bad{prom({"--query", "up", "--abort-above", "1", "--abort-below", "2"}), "must be below --abort-above"},
        Bad{prom({"--query", "up", "--abort-above", "lots"}), "not a number"},
        Bad{prom({"--query", "up", "--abort-above", "inf"}), "not a finite number"},
        Bad{prom({"--query", " ", "--abort-above", "1"}), "empty PromQL"},
        Bad{prom({"--query", "up", "--abort-above", "1", "--query-errors", "-1"}), "--query-errors"},
        Bad{prom({"--query", "up", "--abort-above", "1", "--prometheus-interval", "10ms"}), "--prometheus-interval"},
        Bad{{"--prometheus-url", "http://p:9090/?x=1", "--query", "up", "--abort-above", "1"}, "without a query"},
        Bad{{"--prometheus-url", "ftp://p", "--query", "up", "--abort-above", "1"}, "--prometheus-url"},
        Bad{prom({"--prometheus-ca", "/etc/hostname", "--query", "up", "--abort-above", "1"}), "is for an https://"},
        Bad{{"--abort-above", "1", "--kernel-signal", "tcp_resets", "--query", "up", "--prometheus-url", "http://p"},
            "comes before the guardrail it limits"},
        Bad{{"--kernel-signal", "tcp_resets", "--abort-below", "1"}, "does not limit --kernel-signal"},
        Bad{{"--kernel-signal", "tcp_resets", "--abort-above", "1", "--signal-source", "ebpf"}, "--signal-source"},
        Bad{{"--signal-source", "procfs"}, "give --kernel-signal too"},
        Bad{prom({"--slo-burn-rate", "ratio_rate5m", "--abort-above", "14.4"}), "has no {window}"},
        Bad{prom({"--slo-burn-rate", "r{window}", "--abort-above", "14.4", "--burn-windows", "1h,5m"}), "shorter"},
        Bad{prom({"--slo-burn-rate", "r{window}", "--abort-above", "14.4", "--burn-windows", "5min,1h"}),
            "not a Prometheus duration"},
        Bad{prom({"--slo-burn-rate", "r{window}", "--abort-above", "14.4", "--burn-windows", "5m"}), "FAST,SLOW"},
        Bad{prom({"--slo-burn-rate", "r{window}"}), "needs --abort-above"},
        Bad{prom({"--slo-burn-rate", "r{window}", "--abort-below", "1"}), "no --abort-below"},
        Bad{prom({"--slo-burn-rate", "r{window}", "--abort-above", "0"}), "a burn rate above 0"},
        Bad{prom({"--slo-burn-rate", "r{window}", "--abort-above", "2", "--slo-target", "100"}), "--slo-target"},
        Bad{prom({"--slo-burn-rate", "a", "--slo-burn-rate", "b", "--abort-above", "2", "--burn-windows", "1m,2m"}),
            "--burn-windows fills {window}"},
        Bad{prom({"--slo-burn-rate", "a", "--slo-burn-rate", "b", "--slo-burn-rate", "c", "--abort-above", "2"}),
            "twice"},
        Bad{{"--slo-target", "99.9"}, "give --slo-burn-rate too"},
        Bad{{"--slo-watchdog", "api", "--abort-burn-rate-5m", "3"}, "give --prometheus-url too"},
        Bad{{"--abort-burn-rate-5m", "3"}, "give --slo-watchdog SERVICE too"},
        Bad{prom({"--slo-watchdog", "api"}), "needs --abort-burn-rate-5m"},
        Bad{prom({"--slo-watchdog", "api", "--abort-burn-rate-5m", "fast"}),
            "--abort-burn-rate-5m 'fast': not a number"},
        Bad{prom({"--slo-watchdog", "api", "--abort-burn-rate-5m", "0"}), "a burn rate above 0"},
        Bad{prom({"--slo-watchdog", "Not A Name", "--abort-burn-rate-5m", "3"}), "a service name is"},
        Bad{prom({"--slo-watchdog", "a", "--slo-watchdog", "b", "--abort-burn-rate-5m", "3"}), "give one service"},
        Bad{prom({"--slo-watchdog", "api", "--abort-burn-rate-5m", "3", "--query-errors", "2"}),
            "tolerates no failed query"},
        Bad{{"--health-url", "http://h/", "--health-ca", "/etc/hostname"}, "is for an https://"},
        Bad{{"--health-url", "https://h/", "--health-ca", "/no/such/ca.pem"}, "cannot be read"},
        Bad{{"--health-ca", "/etc/hostname"}, "give --health-url too"},
        Bad{{"--steady-state", "2s"}, "--health-url, --kernel-signal or --prometheus-url"}));

}  // namespace
}  // namespace faultline
