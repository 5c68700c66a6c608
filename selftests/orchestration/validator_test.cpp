// The validator's table: a row per refusal code (and the runs it allows), the
// SLO rows read from a real Prometheus whose recording rules make the slo:*
// series, the clock set to the row's time. The service facts of a row are
// the test's own data (what faultcp's store would hold); the SLO is never.
#include "userspace/orchestration/validator.h"

#include <gtest/gtest.h>

#include <ctime>

#include "orchestration_env.h"

namespace florch {
namespace {

using faultline::FactSource;
using faultline::FixedClock;
using faultline::InstantQuery;
using faultline::Proposal;
using faultline::Result;
using faultline::ServiceFacts;
using faultline::ServiceSpec;
using faultline::SloReading;

const int64_t kTuesday10 = utc(2026, 12, 8, 10, 0);
const int64_t kTuesday1559 = utc(2026, 12, 8, 15, 59);
const int64_t kSaturday10 = utc(2026, 12, 12, 10, 0);

// A row's facts: a service as registered, and the state around it; the SLO
// from Prometheus.
class RowFacts final : public FactSource {
 public:
  RowFacts(std::optional<ServiceFacts> s, InstantQuery& prom) : s_(std::move(s)), prom_(prom) {}
  Result<std::optional<ServiceFacts>> service(const std::string& name) override {
    if (s_ && s_->spec.name == name) return s_;
    return std::optional<ServiceFacts>();
  }
  Result<SloReading> slo(const ServiceSpec& s) override { return read_slo(prom_, s); }
  Result<bool> kill_switch_engaged(const ServiceFacts&) override { return killed; }
  Result<int64_t> experiments_in_flight(const ServiceFacts&) override { return in_flight; }
  bool killed = false;
  int64_t in_flight = 0;

 private:
  std::optional<ServiceFacts> s_;
  InstantQuery& prom_;
};

ServiceFacts service(const std::string& name) {
  ServiceFacts f;
  f.spec.name = name;
  f.spec.chaos_enabled = true;
  f.spec.instances = {{1, "/app-a"}, {2, "/app-b"}, {3, "/app-c"}};
  f.spec.min_available = 1;
  f.replicas_ready = 3;
  f.dependencies = {"10.0.0.9:6379"};
  return f;
}

struct Row {
  const char* what;
  Proposal proposal;
  std::function<void(ServiceFacts&, RowFacts*)> change;  // on the healthy service's facts
  int64_t at;
  std::vector<std::string> codes;  // empty: allowed
  bool prometheus_down = false;
};

class ValidatorTable : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(flenf::on_path("prometheus")) << "the prometheus server is not installed: scripts/install-deps.sh";
    prom_ = new SloPrometheus(slo_exposition("healthy", 0.2, 0.3, 0.9) + slo_exposition("burning", 2.5, 1.5, 0.8) +
                              slo_exposition("spent", 0.1, 0.4, 0.3) + slo_exposition("at-limit", 0.5, 1.0, 0.5));
    std::string why;
    ASSERT_TRUE(prom_->ready(why)) << why;
    for (const char* s : {"healthy", "burning", "spent", "at-limit"})
      ASSERT_TRUE(prom_->wait_for(std::string("count(slo:error_budget_remaining{service=\"") + s + "\"})", 1))
          << "the recording rules did not record " << s;
  }
  static void TearDownTestSuite() {
    delete prom_;
    prom_ = nullptr;
  }
  static SloPrometheus* prom_;
};
SloPrometheus* ValidatorTable::prom_ = nullptr;

TEST_F(ValidatorTable, ARowPerRefusalCode) {
  auto renamed = [](const char* name) { return [name](ServiceFacts& f, RowFacts*) { f.spec.name = name; }; };
  const Proposal cpu{"healthy", "cpu_stress_one", "", 60};
  const Proposal kill{"healthy", "process_kill_one", "", 60};
  const Proposal delay{"healthy", "upstream_delay", "10.0.0.9:6379", 60};
  const std::vector<Row> rows = {
      {"a healthy service in its window", cpu, nullptr, kTuesday10, {}},
      {"a kill with 3 ready and min_available 1", kill, nullptr, kTuesday10, {}},
      {"a delay on an observed dependency", delay, nullptr, kTuesday10, {}},
      {"not opted in",
       cpu,
       [](ServiceFacts& f, RowFacts*) { f.spec.chaos_enabled = false; },
       kTuesday10,
       {"not_opted_in"}},
      {"not registered", {"nobody", "cpu_stress_one", "", 60}, nullptr, kTuesday10, {"not_opted_in"}},
      {"on a Saturday", cpu, nullptr, kSaturday10, {"outside_window"}},
      {"a run crossing 16:00", {"healthy", "cpu_stress_one", "", 120}, nullptr, kTuesday1559, {"outside_window"}},
      {"Saturday in a window that has it",
       cpu,
       [](ServiceFacts& f, RowFacts*) { f.spec.window.days = 0b1000000; },
       kSaturday10,
       {}},
      {"burning faster than the budget refills",
       {"burning", "cpu_stress_one", "", 60},
       renamed("burning"),
       kTuesday10,
       {"slo_unhealthy"}},
      {"burn rate over 1h exactly 1, budget exactly 0.5",
       {"at-limit", "cpu_stress_one", "", 60},
       renamed("at-limit"),
       kTuesday10,
       {"slo_unhealthy"}},
      {"most of the budget spent",
       {"spent", "cpu_stress_one", "", 60},
       renamed("spent"),
       kTuesday10,
       {"slo_unhealthy"}},
      {"a kill with one ready replica",
       kill,
       [](ServiceFacts& f, RowFacts*) { f.replicas_ready = 1; },
       kTuesday10,
       {"no_redundancy"}},
      {"a kill that would go under min_available",
       kill,
       [](ServiceFacts& f, RowFacts*) { f.spec.min_available = 3; },
       kTuesday10,
       {"no_redundancy"}},
      {"a kill without min_available",
       kill,
       [](ServiceFacts& f, RowFacts*) { f.spec.min_available.reset(); },
       kTuesday10,
       {"no_redundancy"}},
      {"a delay on a target never seen",
       {"healthy", "upstream_delay", "10.0.0.7:5432", 60},
       nullptr,
       kTuesday10,
       {"not_observed_dependency"}},
      {"a partition before any flow was reported",
       {"healthy", "upstream_partition", "10.0.0.9:6379", 60},
       [](ServiceFacts& f, RowFacts*) { f.dependencies.clear(); },
       kTuesday10,
       {"not_observed_dependency"}},
      {"stateful", cpu, [](ServiceFacts& f, RowFacts*) { f.spec.stateful = true; }, kTuesday10, {"stateful"}},
      {"an experiment in flight",
       cpu,
       [](ServiceFacts&, RowFacts* r) { r->in_flight = 1; },
       kTuesday10,
       {"one_at_a_time"}},
      {"the kill switch", cpu, [](ServiceFacts&, RowFacts* r) { r->killed = true; }, kTuesday10, {"kill_switch"}},
      {"no SLO series for the service",
       {"unscraped", "cpu_stress_one", "", 60},
       renamed("unscraped"),
       kTuesday10,
       {"fact_unreadable"}},
      {"Prometheus not answering", cpu, nullptr, kTuesday10, {"fact_unreadable"}, true},
      {"several at once",
       kill,
       [](ServiceFacts& f, RowFacts* r) {
         f.spec.chaos_enabled = false;
         f.spec.stateful = true;
         r->killed = true;
       },
       kSaturday10,
       {"kill_switch", "not_opted_in", "outside_window", "stateful"}},
  };
  auto up = prom_->client();
  // A port nothing listens on: the query is refused, as from a Prometheus that is down.
  auto down =
      faultline::prometheus_query("http://127.0.0.1:" + std::to_string(flenf::free_loopback_port()), 2'000'000'000ULL);
  ASSERT_TRUE(down);
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    ASSERT_FALSE(faultline::check_proposal(row.proposal)) << "the row's proposal is well formed";
    ServiceFacts f = service("healthy");
    RowFacts facts(std::nullopt, row.prometheus_down ? **down : *up);
    if (row.change) row.change(f, &facts);
    RowFacts with(f, row.prometheus_down ? **down : *up);
    with.killed = facts.killed;
    with.in_flight = facts.in_flight;
    FixedClock clock(row.at);
    auto v = faultline::validate(row.proposal, with, clock);
    std::vector<std::string> codes;
    for (const auto& r : v.refusals) {
      codes.push_back(r.code);
      EXPECT_FALSE(r.message.empty()) << r.code << " without its sentence";
    }
    EXPECT_EQ(codes, row.codes) << v.to_json().dump(2);
    EXPECT_EQ(v.ok(), row.codes.empty());
  }
}

TEST(Proposals, BadOnesAreNamed) {
  struct Bad {
    Proposal p;
    const char* field;
  };
  for (const auto& b : std::vector<Bad>{{{"Checkout", "cpu_stress_one", "", 60}, "service"},
                                        {{"checkout", "delete_database", "", 60}, "fault"},
                                        {{"checkout", "upstream_delay", "", 60}, "target"},
                                        {{"checkout", "cpu_stress_one", "10.0.0.1:80", 60}, "target"},
                                        {{"checkout", "cpu_stress_one", "", 0}, "duration_s"},
                                        {{"checkout", "cpu_stress_one", "", 3601}, "duration_s"}}) {
    auto e = faultline::check_proposal(b.p);
    ASSERT_TRUE(e) << b.field;
    EXPECT_EQ(e->field, b.field) << e->text();
  }
}

TEST(ChaosWindow, WeekdaysNineToFourUtcByDefault) {
  faultline::ChaosWindow w;
  EXPECT_TRUE(w.contains(kTuesday10, kTuesday10 + 3600));
  EXPECT_TRUE(w.contains(utc(2026, 12, 8, 9, 0), utc(2026, 12, 8, 16, 0)));
  EXPECT_FALSE(w.contains(utc(2026, 12, 8, 8, 59), utc(2026, 12, 8, 9, 30)));
  EXPECT_FALSE(w.contains(kTuesday1559, kTuesday1559 + 61));
  EXPECT_FALSE(w.contains(kSaturday10, kSaturday10 + 60));
  EXPECT_FALSE(w.contains(utc(2026, 12, 13, 10, 0), utc(2026, 12, 13, 10, 1)));  // Sunday
  EXPECT_TRUE(w.contains(utc(2026, 12, 11, 15, 0), utc(2026, 12, 11, 15, 30)));  // Friday
  EXPECT_EQ(w.describe(), "Mon-Fri 09:00-16:00 UTC");
}

TEST(ServiceSpec, ReadsDefaultsAndRoundTrips) {
  auto r = faultline::read_service_spec(
      nlohmann::json::parse(R"({"name":"checkout","instances":[{"agent":1,"cgroup":"/checkout.slice"}]})"));
  ASSERT_TRUE(std::holds_alternative<ServiceSpec>(r)) << std::get<faultline::SpecError>(r).text();
  const auto& s = std::get<ServiceSpec>(r);
  EXPECT_EQ(s.slo.burn_rate_5m, "slo:burn_rate5m");
  EXPECT_EQ(s.slo.burn_rate_1h, "slo:burn_rate1h");
  EXPECT_EQ(s.slo.budget_remaining, "slo:error_budget_remaining");
  EXPECT_FALSE(s.chaos_enabled);
  EXPECT_FALSE(s.stateful);
  EXPECT_FALSE(s.min_available);
  auto j = faultline::service_spec_json(s);
  auto again = faultline::read_service_spec(j);
  ASSERT_TRUE(std::holds_alternative<ServiceSpec>(again));
  EXPECT_EQ(faultline::service_spec_json(std::get<ServiceSpec>(again)), j);
  EXPECT_EQ(faultline::slo_selector(s, s.slo.burn_rate_5m), "slo:burn_rate5m{service=\"checkout\"}");
}

TEST(ServiceSpec, BadFieldsAreNamed) {
  const std::string inst = R"("instances":[{"agent":1,"cgroup":"/a"}])";
  struct Bad {
    std::string body;
    const char* field;
  };
  for (const auto& b : std::vector<Bad>{
           {R"({"instances":[]})", "name"},
           {R"({"name":"a b",)" + inst + "}", "name"},
           {R"({"name":"x"})", "instances"},
           {R"({"name":"x","instances":[{"agent":0,"cgroup":"/a"}]})", "instances[0].agent"},
           {R"({"name":"x","instances":[{"agent":1,"cgroup":"a"}]})", "instances[0].cgroup"},
           {R"({"name":"x","instances":[{"agent":1,"cgroup":"/a/../b"}]})", "instances[0].cgroup"},
           {R"({"name":"x","instances":[{"agent":1,"cgroup":"/a","pod":"p"}]})", "instances[0].pod"},
           {R"({"name":"x",)" + inst + R"(,"endpoints":["db"]})", "endpoints[0]"},
           {R"({"name":"x",)" + inst + R"(,"endpoints":["db:70000"]})", "endpoints[0]"},
           {R"({"name":"x",)" + inst + R"(,"health_url":"ftp://h/"})", "health_url"},
           {R"({"name":"x",)" + inst + R"x(,"slo":{"burn_rate_5m":"rate(x[5m])"}})x", "slo.burn_rate_5m"},
           {R"({"name":"x",)" + inst + R"(,"slo":{"label":"a:b"}})", "slo.label"},
           {R"({"name":"x",)" + inst + R"(,"min_available":2})", "min_available"},
           {R"({"name":"x",)" + inst + R"(,"stateful":"yes"})", "stateful"},
           {R"({"name":"x",)" + inst + R"(,"chaos":true})", "chaos"},
           {R"({"name":"x",)" + inst + R"(,"window":{"days":["mon","mon"]}})", "window.days"},
           {R"({"name":"x",)" + inst + R"(,"window":{"from_hour":16,"to_hour":9}})", "window.to_hour"},
           {R"({"name":"x",)" + inst + R"(,"owner":"me"})", "owner"},
       }) {
    auto r = faultline::read_service_spec(nlohmann::json::parse(b.body));
    ASSERT_TRUE(std::holds_alternative<faultline::SpecError>(r)) << b.body;
    EXPECT_EQ(std::get<faultline::SpecError>(r).field, b.field) << std::get<faultline::SpecError>(r).text();
  }
}

}  // namespace
}  // namespace florch
