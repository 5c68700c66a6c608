// The Prometheus and SLO burn-rate guardrails against a real Prometheus server
// (the Debian `prometheus` package), started on loopback for each test, scraping
// an exporter the test serves every second. The test moves the metric and the
// run must end within two guardrail intervals with exit 7, for every fault
// family; a Prometheus stopped mid-run is a query error that ends the run once
// the tolerated errors are spent; a healthy metric lets the run complete; and
// several guardrails at once say which one breached, in the ended line and the record.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "guardrail_env.h"

namespace flenf {
namespace {

using Clock = std::chrono::steady_clock;

std::string gauge(double v) { return "# TYPE fl_test_metric gauge\nfl_test_metric " + std::to_string(v) + "\n"; }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class PrometheusGuardrailTest : public EnforceTest {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(on_path("prometheus")) << "the prometheus server is not installed: scripts/install-deps.sh installs it";
    exporter_.emplace();
    exporter_->set(gauge(1));
    prom_.emplace(state_dir_ + "/prometheus", exporter_->port());
    ASSERT_TRUE(prom_->wait_ready(60s)) << "Prometheus did not become ready:\n" << prom_->log();
    ASSERT_TRUE(prom_->wait_for_value("fl_test_metric", 1, 30s)) << "the exporter was not scraped:\n" << prom_->log();
    cg_.emplace(unique_name("prom"));
  }
  void TearDown() override {
    cg_.reset();
    prom_.reset();
    exporter_.reset();
    EnforceTest::TearDown();
  }

  // A syscall fault on the test's cgroup: the cheapest fault to run.
  std::vector<std::string> syscall_run(const std::string& duration, const std::vector<std::string>& extra) const {
    std::vector<std::string> argv = {kFaultctl,      "run",      "syscall",       "--syscall",  "connect", "--errno",
                                     "ECONNREFUSED", "--cgroup", cg_->relative(), "--duration", duration,  "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  std::vector<std::string> prometheus_flags(const std::string& query, const std::string& limit_flag,
                                            const std::string& limit) const {
    return {"--prometheus-url", prom_->url(), "--query", query, limit_flag, limit, "--interval", "1s"};
  }

  std::optional<Exporter> exporter_;
  std::optional<PrometheusServer> prom_;
  std::optional<TestCgroup> cg_;
};

TEST_F(PrometheusGuardrailTest, AHealthyMetricLetsTheRunComplete) {
  CommandResult r = run(syscall_run("4s", prometheus_flags("fl_test_metric", "--abort-above", "10")), 60s);
  ASSERT_TRUE(r.status.is(0)) << r.describe() << prom_->log();
  auto readings = json_events_named(r.out, "prometheus");
  ASSERT_GE(readings.size(), 3u) << "a reading a second for 4s\n" << r.describe();
  for (const auto& e : readings) {
    EXPECT_EQ(e["healthy"], true) << e.dump();
    EXPECT_EQ(e["value"], 1.0) << e.dump();
  }
  auto started = json_event(r.out, "started");
  ASSERT_TRUE(started) << r.describe();
  EXPECT_EQ((*started)["guardrail"]["prometheus"]["query"], "fl_test_metric") << started->dump();
}

// The query is asked once before the fault: a guardrail that cannot see now
// would only be found out mid-fault. Nothing is injected.
TEST_F(PrometheusGuardrailTest, AQueryThatFailsBeforeTheFaultInjectsNothing) {
  CommandResult empty = run(syscall_run("10s", prometheus_flags("fl_no_such_metric", "--abort-above", "1")), 60s);
  EXPECT_TRUE(empty.status.is(1)) << empty.describe();
  EXPECT_NE(empty.err.find("prometheus: the query fl_no_such_metric failed before the fault, so nothing was injected: "
                           "the query matched no series"),
            std::string::npos)
      << empty.describe();
  EXPECT_FALSE(json_event(empty.out, "started")) << empty.describe();
  CommandResult syntax = run(syscall_run("10s", prometheus_flags("sum(fl_test_metric", "--abort-above", "1")), 60s);
  EXPECT_TRUE(syntax.status.is(1)) << syntax.describe();
  EXPECT_NE(syntax.err.find("HTTP 400: Prometheus says bad_data: "), std::string::npos) << syntax.describe();
}

// The scrape takes up to one interval (1s) to see the moved metric, the next
// query up to one more: the run must end within two intervals of the move.
// The slack is for the scrape's own duration and faultctl printing its end.
constexpr double kTwoIntervals = 2.0;
constexpr double kSlack = 0.5;

class PrometheusFamilyTest : public PrometheusGuardrailTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    PrometheusGuardrailTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (GetParam() == "packet") {
      ns_.emplace(unique_name("promn"));
      peer_.emplace(unique_name("promp"));
      veth_.emplace(*ns_, veth_end(43, 'a'), *peer_, veth_end(43, 'b'));
    }
  }
  void TearDown() override {
    veth_.reset();
    peer_.reset();
    ns_.reset();
    PrometheusGuardrailTest::TearDown();
  }
  std::vector<std::string> family_run(const std::vector<std::string>& extra) const {
    if (GetParam() == "syscall") return syscall_run("60s", extra);
    std::vector<std::string> argv = {kFaultctl, "run"};
    if (GetParam() == "packet")
      argv.insert(argv.end(), {"loss", "--netns", ns_->name(), "--target", veth_addr(43, 'b'), "--percent", "10"});
    else
      argv.insert(argv.end(), {"cpu", "--cores", "1", "--load", "10"});
    argv.insert(argv.end(), {"--duration", "60s", "--json"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  std::optional<Netns> ns_, peer_;
  std::optional<VethPair> veth_;
};

TEST_P(PrometheusFamilyTest, AMovedMetricAbortsWithinTwoIntervals) {
  ChildProcess f = ChildProcess::spawn(family_run(prometheus_flags("fl_test_metric", "--abort-above", "10")));
  ASSERT_TRUE(f.wait_for("\"started\"", 30s)) << f.describe();
  // Two healthy readings first: the guardrail was reading, not just starting.
  ASSERT_TRUE(f.wait_for("\"value\":1.0", 10s)) << f.describe();
  ASSERT_FALSE(f.wait_for("\"ended\"", 1200ms)) << "ended before the metric moved\n" << f.describe();
  exporter_->set(gauge(100));
  const auto moved = Clock::now();
  ASSERT_TRUE(f.wait_for("\"ended\"", 15s)) << f.describe();
  const double took = seconds_since(moved);
  auto e = f.wait(30s);
  ASSERT_TRUE(e && e->is(7)) << f.describe();
  auto ended = json_event(f.out(), "ended");
  ASSERT_TRUE(ended) << f.describe();
  EXPECT_EQ((*ended)["reason"], "guardrail") << ended->dump();
  EXPECT_EQ((*ended)["guardrail"], "prometheus") << ended->dump();
  EXPECT_NE(ended->value("detail", "").find("prometheus: fl_test_metric = 100, above 10"), std::string::npos)
      << ended->dump();
  EXPECT_LE(took, kTwoIntervals + kSlack) << "the moved metric ended the run " << took << "s after the move";
  std::fprintf(stderr,
               "[ info ] %s fault: the moved metric ended the run %.2fs after the move (interval 1s, scrape 1s)\n",
               GetParam().c_str(), took);
}

INSTANTIATE_TEST_SUITE_P(Family, PrometheusFamilyTest, ::testing::Values("packet", "syscall", "resource"),
                         [](const auto& info) { return info.param; });

TEST_F(PrometheusGuardrailTest, AStoppedPrometheusIsAQueryErrorThatAborts) {
  ChildProcess f =
      ChildProcess::spawn(syscall_run("60s", {"--prometheus-url", prom_->url(), "--query", "fl_test_metric",
                                              "--abort-above", "10", "--interval", "1s", "--query-errors", "2"}));
  ASSERT_TRUE(f.wait_for("\"started\"", 30s)) << f.describe();
  ASSERT_TRUE(f.wait_for("\"value\":1.0", 10s)) << f.describe();
  prom_->stop();
  const auto stopped = Clock::now();
  ASSERT_TRUE(f.wait_for("\"ended\"", 20s)) << f.describe();
  const double took = seconds_since(stopped);
  auto e = f.wait(30s);
  ASSERT_TRUE(e && e->is(7)) << "a Prometheus that cannot answer must not pass silently\n" << f.describe();
  auto ended = json_event(f.out(), "ended");
  ASSERT_TRUE(ended) << f.describe();
  EXPECT_EQ((*ended)["guardrail"], "prometheus") << ended->dump();
  EXPECT_NE(ended->value("detail", "").find("the query failed 3 times in a row (--query-errors tolerates 2)"),
            std::string::npos)
      << ended->dump();
  int tolerated = 0;
  for (const auto& r : json_events_named(f.out(), "prometheus")) {
    if (r.contains("query_error") && r["healthy"] == true) ++tolerated;
  }
  EXPECT_EQ(tolerated, 2) << "two failed queries tolerated, the third ends it\n" << f.describe();
  // Three queries, one a second, after the stop.
  EXPECT_LE(took, 3 + kSlack) << f.describe();
  std::fprintf(stderr, "[ info ] Prometheus stopped: the run ended %.2fs later, after 3 failed queries\n", took);
}

// The multiwindow rule: a fast window burning alone is a blip, not an abort;
// both windows burning is.
TEST_F(PrometheusGuardrailTest, ABurnRateAbortsOnlyWhenBothWindowsBurn) {
  auto ratios = [&](double fast, double slow) {
    exporter_->set(gauge(1) + "# TYPE fl_test_error_ratio gauge\nfl_test_error_ratio{window=\"5m\"} " +
                   std::to_string(fast) + "\nfl_test_error_ratio{window=\"1h\"} " + std::to_string(slow) + "\n");
  };
  ratios(0.5, 0.02);  // a 99% SLO: burn rates 50 and 2
  ASSERT_TRUE(prom_->wait_for_value("fl_test_error_ratio{window=\"1h\"}", 0.02, 15s)) << prom_->log();
  ChildProcess f = ChildProcess::spawn(syscall_run(
      "60s", {"--prometheus-url", prom_->url(), "--slo-burn-rate", "fl_test_error_ratio{window=\"{window}\"}",
              "--slo-target", "99", "--burn-windows", "5m,1h", "--abort-above", "10", "--interval", "1s"}));
  ASSERT_TRUE(f.wait_for("\"started\"", 30s)) << f.describe();
  ASSERT_FALSE(f.wait_for("\"ended\"", 3500ms)) << "the fast window alone ended it\n" << f.describe();
  auto readings = json_events_named(f.out(), "slo_burn_rate");
  ASSERT_GE(readings.size(), 2u) << f.describe();
  for (const auto& r : readings) {
    EXPECT_EQ(r["healthy"], true) << "only the fast window burns\n" << r.dump();
    EXPECT_NEAR(r.value("burn_rate_fast", 0.0), 50, 1e-6) << r.dump();
    EXPECT_NEAR(r.value("burn_rate_slow", 0.0), 2, 1e-6) << r.dump();
  }
  ratios(0.5, 0.5);
  const auto moved = Clock::now();
  ASSERT_TRUE(f.wait_for("\"ended\"", 15s)) << f.describe();
  const double took = seconds_since(moved);
  auto e = f.wait(30s);
  ASSERT_TRUE(e && e->is(7)) << f.describe();
  auto ended = json_event(f.out(), "ended");
  EXPECT_EQ((*ended)["guardrail"], "slo burn rate") << ended->dump();
  EXPECT_NE(ended->value("detail", "").find("burns 50x in the 5m window and 50x in the 1h window, both above 10x"),
            std::string::npos)
      << ended->dump();
  EXPECT_LE(took, kTwoIntervals + kSlack);
  std::fprintf(stderr, "[ info ] burn rate: both windows burning ended the run %.2fs after the move\n", took);
}

// HTTP + Prometheus + kernel signal at once: the Prometheus breach ends the run,
// and the ended line, the verdict and the samples say which guardrail it was.
TEST_F(PrometheusGuardrailTest, SeveralGuardrailsAtOnceSayWhichBreached) {
  HttpResponder health([](const std::string&) { return http_response("200 OK", "ok\n"); });
  const std::string dir = state_dir_ + "/record";
  std::vector<std::string> flags = {"--health-url",     "http://127.0.0.1:" + std::to_string(health.port()) + "/health",
                                    "--kernel-signal",  "tcp_retransmits",
                                    "--abort-above",    "1000000",
                                    "--prometheus-url", prom_->url(),
                                    "--query",          "fl_test_metric",
                                    "--abort-above",    "10",
                                    "--interval",       "1s",
                                    "--hypothesis",     "connect errors in one cgroup move no metric",
                                    "--steady-state",   "2s",
                                    "--record",         dir};
  ChildProcess f = ChildProcess::spawn(syscall_run("60s", flags));
  ASSERT_TRUE(f.wait_for("\"started\"", 30s)) << f.describe();
  auto started = json_event(f.out(), "started");
  ASSERT_TRUE(started) << f.describe();
  const auto& g = (*started)["guardrail"];
  EXPECT_TRUE(g.contains("health_url") && g.contains("prometheus") && g.contains("kernel_signal")) << g.dump();
  EXPECT_EQ(g["kernel_signal"]["source"], "tp_btf") << "this kernel loads the tracepoint programs\n" << g.dump();
  EXPECT_EQ(g["summary"].size(), 3u) << g.dump();
  ASSERT_TRUE(f.wait_for("\"value\":1.0", 10s)) << f.describe();
  exporter_->set(gauge(100));
  auto e = f.wait(30s);
  ASSERT_TRUE(e && e->is(7)) << f.describe();
  auto ended = json_event(f.out(), "ended");
  ASSERT_TRUE(ended) << f.describe();
  EXPECT_EQ((*ended)["guardrail"], "prometheus") << ended->dump();
  EXPECT_EQ(json_events_named(f.out(), "probe").back()["healthy"], true) << "the health check held";

  std::ifstream v(dir + "/verdict.json");
  auto verdict = nlohmann::json::parse(v, nullptr, false);
  ASSERT_TRUE(verdict.is_object()) << f.describe();
  EXPECT_EQ(verdict["verdict"], "aborted") << verdict.dump(2);
  EXPECT_EQ(verdict.value("detail", "").rfind("prometheus: fl_test_metric = 100", 0), 0u) << verdict.dump(2);
  std::ifstream h(dir + "/hypothesis.json");
  auto hyp = nlohmann::json::parse(h, nullptr, false);
  EXPECT_EQ(hyp["guardrail"]["prometheus"]["abort_above"], 10) << hyp.dump(2);
  // Every sample carries all three signals; the breaching one names its guardrail.
  std::ifstream samples(dir + "/samples.jsonl");
  bool breach_named = false;
  int fault_samples = 0;
  for (std::string line; std::getline(samples, line);) {
    auto s = nlohmann::json::parse(line, nullptr, false);
    if (s.value("phase", "") != "fault") continue;
    ++fault_samples;
    EXPECT_TRUE(s.contains("latency_ms") && s.contains("tcp_retransmits_per_s")) << line;
    if (s.value("problem", "").rfind("prometheus: ", 0) == 0) breach_named = true;
  }
  EXPECT_GE(fault_samples, 1);
  EXPECT_TRUE(breach_named) << "the breaching sample names its guardrail";
  CommandResult report = run({kFaultctl, "report", dir});
  EXPECT_TRUE(report.status.is(0)) << report.describe();
  EXPECT_NE(report.out.find("guardrail:   Prometheus " + prom_->url()), std::string::npos) << report.out;
}

}  // namespace
}  // namespace flenf
