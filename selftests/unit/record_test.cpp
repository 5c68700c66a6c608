// Experiment records: SLO parsing, percentiles, the recorder's phases and verdicts, fingerprints.
#include "userspace/run/record.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/run/record_reader.h"

namespace faultline {
namespace {

GuardrailReading ok(double ms) { return {0, true, {{"latency_ms", ms}, {"status", 200}}, ""}; }
GuardrailReading failed() { return {0, false, {}, "connect: Connection refused"}; }

TEST(Slo, Parses) {
  auto p = parse_slo("p99<300ms");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->metric, Slo::Metric::LatencyPercentile);
  EXPECT_DOUBLE_EQ(p->percentile, 99);
  EXPECT_DOUBLE_EQ(p->threshold, 300);
  EXPECT_FALSE(p->inclusive);
  auto p999 = parse_slo("p99.9 <= 1s");
  ASSERT_TRUE(p999.ok()) << p999.error().message;
  EXPECT_DOUBLE_EQ(p999->percentile, 99.9);
  EXPECT_DOUBLE_EQ(p999->threshold, 1000);
  EXPECT_TRUE(p999->inclusive);
  auto s = parse_slo("success>99.9%");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->metric, Slo::Metric::SuccessRate);
  EXPECT_DOUBLE_EQ(s->threshold, 99.9);
}

TEST(Slo, RefusesNonsense) {
  for (const char* bad : {"", "p99", "p99>300ms", "success<99%", "success>99", "p0<1s", "p101<1s", "latency<1s",
                          "p99<300", "p99<0ms", "success>100%", "<300ms", "pxx<1s"}) {
    auto r = parse_slo(bad);
    EXPECT_FALSE(r.ok()) << "accepted '" << bad << "'";
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("--slo"), std::string::npos) << r.error().message;
    }
  }
}

TEST(Summary, NearestRankAndFailuresCountAsSlow) {
  std::vector<GuardrailReading> v;
  for (int i = 1; i <= 100; ++i) v.push_back(ok(i));
  auto s = summarize(v);
  EXPECT_EQ(s.samples, 100u);
  EXPECT_DOUBLE_EQ(s.success_percent, 100);
  EXPECT_DOUBLE_EQ(*s.p50_ms, 50);
  EXPECT_DOUBLE_EQ(*s.p99_ms, 99);
  EXPECT_DOUBLE_EQ(*s.max_ms, 100);
  v.push_back(failed());
  v.push_back(failed());
  auto f = summarize(v);
  EXPECT_NEAR(f.success_percent, 100.0 * 100 / 102, 1e-9);
  EXPECT_TRUE(std::isinf(*f.p99_ms)) << "two failures out of 102 reach the 99th rank";
  GuardrailReading http500{0, false, {{"latency_ms", 2}, {"status", 500}}, "HTTP 500"};
  EXPECT_TRUE(std::isinf(*latency_percentile({http500}, 50))) << "a fast error is not a fast answer";
  GuardrailReading slow{0, false, {{"latency_ms", 1500}, {"status", 200}}, "slow: 1500ms > 1000ms"};
  EXPECT_DOUBLE_EQ(*latency_percentile({slow}, 50), 1500) << "a slow answer keeps its latency";
  EXPECT_FALSE(latency_percentile({}, 99).has_value());
}

TEST(Slo, Evaluates) {
  std::vector<GuardrailReading> fast(20, ok(10)), slow(20, ok(400));
  auto p99 = *parse_slo("p99<300ms");
  EXPECT_TRUE(evaluate(p99, fast).met);
  EXPECT_FALSE(evaluate(p99, slow).met);
  EXPECT_DOUBLE_EQ(*evaluate(p99, slow).value, 400);
  EXPECT_NE(evaluate(p99, slow).describe(p99).find("400"), std::string::npos);
  auto succ = *parse_slo("success>=95%");
  std::vector<GuardrailReading> mixed(19, ok(1));
  mixed.push_back(failed());
  EXPECT_TRUE(evaluate(succ, mixed).met) << "19/20 = 95%";
  EXPECT_FALSE(evaluate(*parse_slo("success>95%"), mixed).met);
  EXPECT_FALSE(evaluate(succ, {}).met) << "no readings never hold";
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

class RecordDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-record-unit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/rec";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  RecordOptions opts(const std::string& slo = "") {
    RecordOptions o;
    o.hypothesis = "the service stays fast while we do something";
    o.dir = dir_;
    o.steady_state_ns = 200'000'000ULL;  // 4 readings at 50ms
    if (!slo.empty()) o.slo = *parse_slo(slo);
    o.command_line = "faultctl run test";
    return o;
  }
  static RecordedRun::Sampler constant(GuardrailReading s) {
    return [s]() mutable {
      s.t_ns = boottime_ns();
      return s;
    };
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string root_, dir_;
  std::ostringstream out_;
};

const auto kNever = [] { return false; };

TEST_F(RecordDir, HeldWritesEveryFileAndVerifies) {
  RecordedRun run(opts("p99<300ms"), constant(ok(5)), 50'000'000ULL, {{"health_url", "http://x/"}}, out_, false);
  auto go = run.before_fault({{"kind", "test"}}, kNever);
  ASSERT_TRUE(go.ok()) << go.error().message;
  ASSERT_TRUE(*go);
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/hypothesis.json")) << "written before the fault starts";
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/verdict.json"));
  run.fault_started();
  for (int i = 0; i < 5; ++i) run.fault_sample({boottime_ns(), true, {{"latency_ms", 20}, {"status", 200}}, ""});
  run.fault_ended();
  EXPECT_EQ(run.after_fault(RunOutcome::Completed, "", kNever), HypothesisVerdict::Held);
  auto v = nlohmann::json::parse(read(dir_ + "/verdict.json"));
  EXPECT_EQ(v["verdict"], "held");
  EXPECT_EQ(v["phases"]["fault"]["samples"], 5);
  EXPECT_EQ(v["phases"]["steady"]["samples"], 4);
  EXPECT_EQ(v["phases"]["after"]["samples"], 4) << "the after window is as long as the steady state";
  EXPECT_TRUE(v["recovered"].get<bool>());
  auto h = nlohmann::json::parse(read(dir_ + "/hypothesis.json"));
  EXPECT_EQ(h["hypothesis"], "the service stays fast while we do something");
  EXPECT_EQ(h["steady_state"]["summary"]["samples"], 4);
  EXPECT_EQ(read(dir_ + "/hypothesis.sha256"), sha256_hex(read(dir_ + "/hypothesis.json")) + "  hypothesis.json\n");
  auto check = verify_record(dir_);
  EXPECT_TRUE(check.intact) << (check.problems.empty() ? "" : check.problems[0]);
  auto rec = load_record(dir_);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->samples.size(), 13u) << "steady, fault and after readings in one time series";
}

TEST_F(RecordDir, RefutedWhenTheSloIsMissedDuringTheFault) {
  RecordedRun run(opts("p99<300ms"), constant(ok(5)), 50'000'000ULL, nullptr, out_, true);
  ASSERT_TRUE(*run.before_fault({{"kind", "test"}}, kNever));
  run.fault_started();
  run.fault_sample({boottime_ns(), true, {{"latency_ms", 20}, {"status", 200}}, ""});
  run.fault_sample({boottime_ns(), true, {{"latency_ms", 450}, {"status", 200}}, ""});
  run.fault_ended();
  EXPECT_EQ(run.after_fault(RunOutcome::Completed, "", kNever), HypothesisVerdict::Refuted);
  auto v = nlohmann::json::parse(read(dir_ + "/verdict.json"));
  EXPECT_EQ(v["verdict"], "refuted");
  EXPECT_DOUBLE_EQ(v["slo"]["fault"]["value"].get<double>(), 450);
  EXPECT_NE(out_.str().find("\"event\":\"verdict\""), std::string::npos) << "JSON lines on --json";
}

// A fault that touched nothing: neither held nor refuted, even with the SLO missed
// (the fault had no part in it); the exit code stays that of a completed run.
TEST_F(RecordDir, UntestedWhenTheFaultTouchedNothing) {
  RecordedRun run(opts("p99<300ms"), constant(ok(5)), 50'000'000ULL, nullptr, out_, false);
  ASSERT_TRUE(*run.before_fault({{"kind", "test"}}, kNever));
  run.fault_started();
  run.fault_sample({boottime_ns(), true, {{"latency_ms", 450}, {"status", 200}}, ""});
  run.fault_ended();
  const std::string why = "the fault matched no packet while it was on (egress on lo): nothing was tested";
  EXPECT_EQ(run.after_fault(RunOutcome::Completed, why, kNever, why), HypothesisVerdict::Untested);
  auto v = nlohmann::json::parse(read(dir_ + "/verdict.json"));
  EXPECT_EQ(v["verdict"], "untested") << v.dump(2);
  EXPECT_EQ(v["untested"], why);
  EXPECT_EQ(v["reason"], why);
  EXPECT_NE(out_.str().find("verdict: UNTESTED -- " + why), std::string::npos) << out_.str();
  RunResult r;
  r.verdict = HypothesisVerdict::Untested;
  r.untested = why;
  EXPECT_EQ(exit_code(r), 0) << "documented: an untested completed run exits 0";
}

TEST_F(RecordDir, VerdictKeepsWhatTheFaultCountedWithItsCap) {
  RecordedRun run(opts(), constant(ok(5)), 50'000'000ULL, nullptr, out_, false);
  ASSERT_TRUE(*run.before_fault({{"kind", "loss"}, {"max_injections", 20}}, kNever));
  run.fault_started();
  run.fault_sample({boottime_ns(), true, {{"latency_ms", 20}, {"status", 200}}, ""});
  run.fault_ended();
  run.fault_counted({{"counters", {{"matched", 500}, {"dropped", 20}}},
                     {"cap", {{"max", 20}, {"injected", 20}, {"reached", true}, {"spared", 480}}}});
  EXPECT_EQ(run.after_fault(RunOutcome::Completed, "", kNever), HypothesisVerdict::Held);
  auto v = nlohmann::json::parse(read(dir_ + "/verdict.json"));
  EXPECT_EQ(v["fault_counters"]["cap"]["reached"], true) << v.dump();
  EXPECT_EQ(v["fault_counters"]["counters"]["dropped"], 20) << v.dump();
  EXPECT_EQ(nlohmann::json::parse(read(dir_ + "/hypothesis.json"))["fault"]["max_injections"], 20)
      << "the cap asked for is in the hypothesis, written before the fault";
  EXPECT_TRUE(verify_record(dir_).intact);
}

TEST_F(RecordDir, GuardrailBreachIsAborted) {
  RecordedRun run(opts(), constant(ok(5)), 50'000'000ULL, nullptr, out_, false);
  ASSERT_TRUE(*run.before_fault({{"kind", "test"}}, kNever));
  run.fault_started();
  run.fault_sample({boottime_ns(), false, {}, "connect: Connection refused"});
  run.fault_ended();
  EXPECT_EQ(run.after_fault(RunOutcome::Guardrail, "health check failed", kNever), HypothesisVerdict::Aborted);
  EXPECT_EQ(nlohmann::json::parse(read(dir_ + "/verdict.json"))["verdict"], "aborted");
}

TEST_F(RecordDir, SteadyStateOutsideTheGuardrailRefusesToStart) {
  RecordedRun run(opts(), constant(failed()), 50'000'000ULL, nullptr, out_, false);
  auto go = run.before_fault({{"kind", "test"}}, kNever);
  ASSERT_TRUE(go.ok()) << go.error().message;
  EXPECT_FALSE(*go);
  auto v = nlohmann::json::parse(read(dir_ + "/verdict.json"));
  EXPECT_EQ(v["verdict"], "aborted");
  EXPECT_NE(v["reason"].get<std::string>().find("nothing was injected"), std::string::npos);
  EXPECT_FALSE(v.contains("fault_window")) << "no fault ran";
}

TEST_F(RecordDir, SteadyStateMissingTheSloRefusesToStart) {
  RecordedRun run(opts("p99<300ms"), constant(ok(500)), 50'000'000ULL, nullptr, out_, false);
  auto go = run.before_fault({{"kind", "test"}}, kNever);
  ASSERT_TRUE(go.ok());
  EXPECT_FALSE(*go) << "a hypothesis the system misses already cannot be tested";
}

TEST_F(RecordDir, VerifyNamesTheEditedFile) {
  RecordedRun run(opts(), constant(ok(5)), 50'000'000ULL, nullptr, out_, false);
  ASSERT_TRUE(*run.before_fault({{"kind", "test"}}, kNever));
  run.fault_started();
  run.fault_sample({boottime_ns(), true, {{"latency_ms", 5}, {"status", 200}}, ""});
  (void)run.after_fault(RunOutcome::Completed, "", kNever);
  ASSERT_TRUE(verify_record(dir_).intact);

  std::string h = read(dir_ + "/hypothesis.json");
  auto pos = h.find("stays fast");
  ASSERT_NE(pos, std::string::npos);
  std::string edited = h;
  edited.replace(pos, 10, "stays slow");
  std::ofstream(dir_ + "/hypothesis.json") << edited;
  auto c = verify_record(dir_);
  EXPECT_FALSE(c.intact);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_NE(c.problems[0].find("hypothesis.json"), std::string::npos) << c.problems[0];

  std::ofstream(dir_ + "/hypothesis.json") << h;  // back as it was
  ASSERT_TRUE(verify_record(dir_).intact);
  std::ofstream(dir_ + "/samples.jsonl", std::ios::app) << "{\"phase\":\"fault\",\"healthy\":true}\n";
  auto s = verify_record(dir_);
  EXPECT_FALSE(s.intact);
  ASSERT_FALSE(s.problems.empty());
  EXPECT_NE(s.problems[0].find("samples.jsonl"), std::string::npos) << s.problems[0];
}

TEST_F(RecordDir, NeverOverwritesARecord) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ + "/anything") << "x";
  auto st = check_record_dir(dir_);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("--record"), std::string::npos);
  EXPECT_TRUE(check_record_dir(root_ + "/fresh").ok());
  EXPECT_FALSE(check_record_dir(root_ + "/no/such/parent").ok());
}

}  // namespace
}  // namespace faultline
