// Experiment records end to end: a service on 127.0.0.1 that degrades when its disk fills,
// hypotheses that hold and that are refuted, a guardrail abort, a refusal, and --verify.
#include <filesystem>
#include <fstream>

#include "resource_env.h"

namespace flres {
namespace {

class Record : public ResourceTest {
 protected:
  void SetUp() override {
    ResourceTest::SetUp();
    if (IsSkipped()) return;
    fs_.emplace(dir_ + "/mnt", "64m");
    record_ = dir_ + "/record";
  }
  void TearDown() override {
    fs_.reset();
    ResourceTest::TearDown();
  }
  // A disk fault on our tmpfs, guarded by the service, recorded.
  std::vector<std::string> experiment(const std::string& url, const std::string& slo) {
    std::vector<std::string> a = {"run",
                                  "disk",
                                  "--path",
                                  fs_->path(),
                                  "--fill",
                                  "60%",
                                  "--min-free",
                                  "4MiB",
                                  "--duration",
                                  "3s",
                                  "--health-url",
                                  url,
                                  "--interval",
                                  "500ms",
                                  "--health-max-latency",
                                  "1s",
                                  "--hypothesis",
                                  "the service answers within 300ms while its disk is 60% full",
                                  "--steady-state",
                                  "2s",
                                  "--record",
                                  record_,
                                  "--json"};
    if (!slo.empty()) {
      a.push_back("--slo");
      a.push_back(slo);
    }
    return a;
  }
  [[nodiscard]] bool disk_pressure() const { return fs_->use_percent() > 50; }
  nlohmann::json verdict() const { return nlohmann::json::parse(read_file(record_ + "/verdict.json")); }
  std::optional<Tmpfs> fs_;
  std::string record_;
};

TEST_F(Record, HeldHypothesisIsRecordedAndVerifies) {
  HttpServer svc([] { return HttpServer::Reply{200, 5}; });
  auto o = run(experiment(svc.url(), "p99<300ms"));
  ASSERT_EQ(o.status.code, 0) << o.describe();
  auto events = json_lines(o.out);
  auto find = [&](const std::string& e) {
    auto it =
        std::find_if(events.begin(), events.end(), [&](const nlohmann::json& j) { return j.value("event", "") == e; });
    return it == events.end() ? nlohmann::json() : *it;
  };
  // The order is the point: steady state, then the fingerprint, then the fault.
  std::vector<std::string> order;
  for (const auto& j : events) order.push_back(j.value("event", ""));
  auto pos = [&](const std::string& e) { return std::find(order.begin(), order.end(), e) - order.begin(); };
  EXPECT_LT(pos("steady_state"), pos("hypothesis_recorded"));
  EXPECT_LT(pos("hypothesis_recorded"), pos("started"));
  EXPECT_LT(pos("ended"), pos("verdict"));
  EXPECT_TRUE(find("steady_state")["within_guardrail"].get<bool>());

  auto v = verdict();
  EXPECT_EQ(v["verdict"], "held") << v.dump(2);
  EXPECT_GE(v["phases"]["steady"]["samples"].get<int>(), 4);
  EXPECT_GE(v["phases"]["fault"]["samples"].get<int>(), 4);
  EXPECT_GE(v["phases"]["after"]["samples"].get<int>(), 4);
  EXPECT_TRUE(v["recovered"].get<bool>());
  EXPECT_EQ(v["hypothesis_sha256"], find("hypothesis_recorded")["sha256"]);
  auto h = nlohmann::json::parse(read_file(record_ + "/hypothesis.json"));
  EXPECT_EQ(h["fault"]["kind"], "disk");
  EXPECT_EQ(h["fault"]["fill_percent"], 60.0);
  EXPECT_NE(h["command"].get<std::string>().find("--fill 60%"), std::string::npos);

  auto rep = run({"report", record_});
  EXPECT_EQ(rep.status.code, 0) << rep.describe();
  EXPECT_NE(rep.out.find("verdict:     HELD"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("(verified)"), std::string::npos) << rep.out;
  auto ver = run({"report", "--verify", record_});
  EXPECT_EQ(ver.status.code, 0) << ver.describe();
  auto rj = run({"report", record_, "--json"});
  ASSERT_EQ(rj.status.code, 0) << rj.describe();
  EXPECT_EQ(nlohmann::json::parse(rj.out)["verdict"]["verdict"], "held");
}

TEST_F(Record, RefutedHypothesisCarriesTheNumbers) {
  // Slow, not down: 400ms is inside the guardrail (1s) but outside the hypothesis.
  HttpServer svc([this] { return HttpServer::Reply{200, disk_pressure() ? 400 : 5}; });
  auto o = run(experiment(svc.url(), "p99<300ms"));
  ASSERT_EQ(o.status.code, 8) << "exit 8: the hypothesis was refuted\n" << o.describe();
  auto v = verdict();
  EXPECT_EQ(v["verdict"], "refuted") << v.dump(2);
  double p99 = v["slo"]["fault"]["value"].get<double>();
  EXPECT_GE(p99, 390) << v.dump(2);
  EXPECT_LT(p99, 1000) << v.dump(2);
  EXPECT_TRUE(v["slo"]["after"]["met"].get<bool>()) << "the service recovered once the balloon was gone";
  EXPECT_FALSE(fs_->use_percent() > 1) << "the balloon is gone";

  auto rep = run({"report", record_});
  EXPECT_EQ(rep.status.code, 0) << rep.describe();
  EXPECT_NE(rep.out.find("REFUTED"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("hypothesis: < 300ms"), std::string::npos) << rep.out;
  EXPECT_EQ(run({"report", "--verify", record_}).status.code, 0);

  // Rewriting the hypothesis after the fact is caught.
  std::string h = read_file(record_ + "/hypothesis.json");
  auto at = h.find("within 300ms");
  ASSERT_NE(at, std::string::npos);
  h.replace(at, 12, "within 500ms");
  std::ofstream(record_ + "/hypothesis.json") << h;
  auto ver = run({"report", "--verify", record_});
  EXPECT_EQ(ver.status.code, 1) << ver.describe();
  EXPECT_NE(ver.out.find("hypothesis.json was changed"), std::string::npos) << ver.describe();
}

TEST_F(Record, GuardrailBreachAbortsWithExit7) {
  HttpServer svc([this] { return HttpServer::Reply{disk_pressure() ? 503 : 200, 5}; });
  auto f = start(experiment(svc.url(), ""));
  ASSERT_TRUE(wait_event(*f, "started", 20s)) << f->describe();
  auto ended = wait_event(*f, "ended", 10s);
  ASSERT_TRUE(ended) << f->describe();
  EXPECT_EQ((*ended)["reason"], "guardrail");
  EXPECT_LT(fs_->use_percent(), 1) << "the fault is reverted at the breach, before the after window";
  auto o = f->wait(20s);
  ASSERT_TRUE(o) << f->describe();
  EXPECT_EQ(o->code, 7) << f->describe();
  auto v = verdict();
  EXPECT_EQ(v["verdict"], "aborted");
  EXPECT_EQ(v["outcome"], "guardrail");
  EXPECT_NE(v["reason"].get<std::string>().find("HTTP 503"), std::string::npos) << v.dump(2);
  EXPECT_EQ(run({"report", "--verify", record_}).status.code, 0);
}

TEST_F(Record, RefusesToStartOutsideTheGuardrail) {
  HttpServer svc([] { return HttpServer::Reply{503, 0}; });
  auto f = start(experiment(svc.url(), "success>99%"));
  bool balloon_seen = false;
  std::optional<ExitStatus> o;
  while (!(o = f->wait(50ms))) balloon_seen = balloon_seen || fs_->use_percent() > 1;
  EXPECT_EQ(o->code, 7) << f->describe();
  EXPECT_FALSE(balloon_seen) << "a fault was injected although the steady state was outside the guardrail";
  EXPECT_TRUE(state_files().empty());
  auto v = verdict();
  EXPECT_EQ(v["verdict"], "aborted");
  EXPECT_NE(v["reason"].get<std::string>().find("nothing was injected"), std::string::npos) << v.dump(2);
  EXPECT_NE(f->err().find("refusing to inject"), std::string::npos) << f->describe();
}

// The kernel signal alone can be the record's signal (and a resource fault's guardrail).
TEST_F(Record, KernelSignalAloneIsARecordSignal) {
  auto o = run({"run",
                "disk",
                "--path",
                fs_->path(),
                "--size",
                "8MiB",
                "--min-free",
                "4MiB",
                "--duration",
                "2s",
                "--kernel-signal",
                "tcp_resets",
                "--abort-above",
                "100000",
                "--hypothesis",
                "no reset storm",
                "--steady-state",
                "2s",
                "--record",
                record_,
                "--slo",
                "success>=99%",
                "--json"});
  if (o.status.code == 1 && o.err.find("kernel") != std::string::npos)
    GTEST_SKIP() << "no kernel-signal support here: " << o.err;
  ASSERT_EQ(o.status.code, 0) << o.describe();
  EXPECT_NE(o.out.find("\"event\":\"kernel_signal\""), std::string::npos) << o.describe();
  auto v = verdict();
  EXPECT_EQ(v["verdict"], "held") << v.dump(2);
  auto rec = run({"report", record_, "--json"});
  ASSERT_EQ(rec.status.code, 0) << rec.describe();
  auto samples = nlohmann::json::parse(rec.out)["samples"];
  ASSERT_FALSE(samples.empty());
  EXPECT_TRUE(samples[0].contains("tcp_resets_per_s")) << samples[0].dump();
  EXPECT_FALSE(fs_->use_percent() > 1);
}

TEST_F(Record, NeverOverwritesARecord) {
  std::filesystem::create_directories(record_);
  std::ofstream(record_ + "/hypothesis.json") << "{}";
  HttpServer svc([] { return HttpServer::Reply{200, 0}; });
  auto o = run(experiment(svc.url(), ""));
  EXPECT_EQ(o.status.code, 2) << o.describe();
  EXPECT_NE(o.err.find("--record"), std::string::npos) << o.describe();
  EXPECT_EQ(svc.requests(), 0) << "refused before measuring anything";
}

}  // namespace
}  // namespace flres
