// faultcp's services, facts and validator over HTTP on both backends: a
// service registered, listed, read and deleted (audited, isolated by
// workspace), its profile from the store, its SLO from a real Prometheus with
// slo:* recording rules, and POST /v1/validate refusing from the facts it
// reads itself (the kill switch, an experiment in flight, the SLO), with the
// validator's clock set by the test.
#include <gtest/gtest.h>

#include <csignal>
#include <ctime>

#include "cp_client.h"
#include "orchestration_env.h"
#include "selftests/lib/child_process.h"
#include "userspace/orchestration/catalogue.h"

namespace florch {
namespace {

using fltest::Backend;
using fltest::CpReply;
using nlohmann::json;

class ServicesApi : public ::testing::TestWithParam<Backend> {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(flenf::on_path("prometheus")) << "the prometheus server is not installed: scripts/install-deps.sh";
    prom_ = new SloPrometheus(slo_exposition("checkout", 0.2, 0.4, 0.8) + slo_exposition("search", 3, 1.7, 0.6));
    std::string why;
    ASSERT_TRUE(prom_->ready(why)) << why;
    for (const char* s : {"checkout", "search"})
      ASSERT_TRUE(prom_->wait_for(std::string("count(slo:error_budget_remaining{service=\"") + s + "\"})", 1))
          << "the recording rules did not record " << s;
  }
  static void TearDownTestSuite() {
    delete prom_;
    prom_ = nullptr;
  }
  void start(bool with_prometheus = true) {
    auto config = fltest::test_config();
    if (with_prometheus) config.prometheus = prom_->client();
    clock_ = std::make_shared<faultline::FixedClock>(tuesday_at(10));
    config.clock = clock_;
    server_ = std::make_unique<fltest::CpServer>(GetParam(), config);
  }
  CpReply call(const std::string& method, const std::string& path, const std::string& token = "",
               const std::string& body = "") {
    return server_->call(method, path, token, body);
  }
  // A workspace's session token and two enrolled agents.
  struct Team {
    std::string token;
    int64_t agent1 = 0, agent2 = 0;
  };
  Team team(const std::string& name) {
    Team t;
    auto r =
        call("POST", "/v1/auth/signup", "",
             json{{"email", name + "@example.com"}, {"password", "correct horse battery"}, {"workspace", name}}.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    t.token = r.json().value("token", "");
    for (int64_t* id : {&t.agent1, &t.agent2}) {
      auto enr = call("POST", "/v1/tokens", t.token, R"({"kind":"enrollment"})").json().value("token", "");
      auto reg = call("POST", "/v1/agents/register", enr, R"({"hostname":")" + name + R"(-host"})");
      EXPECT_EQ(reg.status, 201) << reg.describe();
      *id = reg.json().value("agent_id", int64_t{0});
    }
    return t;
  }
  json service_body(const Team& t, const std::string& name) {
    return {{"name", name},
            {"labels", {{"team", "payments"}}},
            {"instances",
             {{{"agent", t.agent1}, {"cgroup", "/app.slice/a"}}, {{"agent", t.agent2}, {"cgroup", "/app.slice/b"}}}},
            {"endpoints", {"10.0.0.5:8080"}},
            {"health_url", "http://10.0.0.5:8080/healthz"},
            {"min_available", 1},
            {"chaos", "enabled"}};
  }
  int64_t create(const Team& t, const json& body) {
    auto r = call("POST", "/v1/services", t.token, body.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    return r.json().value("id", int64_t{0});
  }
  std::vector<std::string> codes(const CpReply& r) {
    std::vector<std::string> c;
    const json j = r.json();  // kept: a range over a temporary's member would dangle
    for (const auto& x : j["refusals"]) c.push_back(x.value("code", ""));
    return c;
  }

  static SloPrometheus* prom_;
  std::shared_ptr<faultline::FixedClock> clock_;
  std::unique_ptr<fltest::CpServer> server_;
};
SloPrometheus* ServicesApi::prom_ = nullptr;

TEST_P(ServicesApi, AServiceIsRegisteredListedReadAndDeletedAudited) {
  start();
  Team t = team("acme");
  const int64_t id = create(t, service_body(t, "checkout"));
  const std::string path = "/v1/services/" + std::to_string(id);
  auto got = call("GET", path, t.token);
  ASSERT_EQ(got.status, 200) << got.describe();
  EXPECT_EQ(got.json()["slo"]["burn_rate_5m"], "slo:burn_rate5m") << "the default series";
  EXPECT_EQ(got.json()["slo"]["burn_rate_1h"], "slo:burn_rate1h");
  EXPECT_EQ(got.json()["slo"]["budget_remaining"], "slo:error_budget_remaining");
  EXPECT_EQ(got.json()["window"]["from_hour"], 9);
  EXPECT_EQ(got.json()["chaos"], "enabled");
  EXPECT_EQ(got.json()["stateful"], false);
  auto dup = call("POST", "/v1/services", t.token, service_body(t, "checkout").dump());
  EXPECT_EQ(dup.status, 409) << dup.describe();
  EXPECT_EQ(dup.json().value("field", ""), "name");
  auto list = call("GET", "/v1/services", t.token).json()["services"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "checkout");

  EXPECT_EQ(call("DELETE", path, t.token).status, 200);
  EXPECT_EQ(call("GET", path, t.token).status, 404);
  EXPECT_EQ(call("DELETE", path, t.token).status, 404);
  auto audit = call("GET", "/v1/audit/export", t.token).body;
  EXPECT_NE(audit.find("service.create"), std::string::npos) << audit;
  EXPECT_NE(audit.find("service.delete"), std::string::npos) << audit;
}

TEST_P(ServicesApi, BadServicesAreRefusedNamingTheFieldAndNothingIsStored) {
  start();
  Team t = team("acme");
  Team other = team("bravo");
  auto body = service_body(t, "checkout");
  struct Bad {
    std::function<void(json&)> change;
    const char* field;
  };
  for (const auto& b : std::vector<Bad>{
           {[](json& j) { j.erase("name"); }, "name"},
           {[](json& j) { j["name"] = "Check Out"; }, "name"},
           {[](json& j) { j["instances"][0]["cgroup"] = "relative"; }, "instances[0].cgroup"},
           {[&](json& j) { j["instances"][1]["agent"] = other.agent1; }, "instances[1].agent"},
           {[](json& j) {
              j["slo"] = {{"burn_rate_1h", "sum(rate(x[1h]))"}};
            },
            "slo.burn_rate_1h"},
           {[](json& j) { j["chaos"] = "yes"; }, "chaos"},
           {[](json& j) { j["min_available"] = 3; }, "min_available"},
           {[](json& j) {
              j["window"] = {{"days", {"someday"}}};
            },
            "window.days"},
           {[](json& j) { j["replicas"] = 2; }, "replicas"},
       }) {
    json j = body;
    b.change(j);
    auto r = call("POST", "/v1/services", t.token, j.dump());
    EXPECT_EQ(r.status, 400) << j.dump() << " -> " << r.describe();
    EXPECT_EQ(r.json().value("field", ""), b.field) << r.describe();
  }
  EXPECT_EQ(call("POST", "/v1/services", t.token, "{not json").status, 400);
  EXPECT_TRUE(call("GET", "/v1/services", t.token).json()["services"].empty());
}

TEST_P(ServicesApi, AnotherWorkspacesServiceIsNotFound) {
  start();
  Team a = team("alpha");
  Team b = team("bravo");
  const std::string B = std::to_string(create(b, service_body(b, "bravo-checkout")));
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/v1/services/" + B},
                                                        {"DELETE", "/v1/services/" + B},
                                                        {"GET", "/v1/services/" + B + "/profile"},
                                                        {"GET", "/v1/services/" + B + "/slo"}}) {
    auto r = call(method, path, a.token);
    EXPECT_EQ(r.status, 404) << method << " " << path << " -> " << r.describe();
    EXPECT_EQ(r.body.find("bravo"), std::string::npos) << r.body;
  }
  EXPECT_EQ(call("GET", "/v1/services", a.token).body.find("bravo"), std::string::npos);
  // A's validator does not see B's service: it was never registered for A.
  auto v =
      call("POST", "/v1/validate", a.token, R"({"service":"bravo-checkout","fault":"cpu_stress_one","duration_s":60})");
  EXPECT_EQ(v.status, 200) << v.describe();
  EXPECT_EQ(codes(v), std::vector<std::string>{"not_opted_in"});
  EXPECT_EQ(call("GET", "/v1/services/" + B, b.token).status, 200) << "A's calls removed B's service";
}

TEST_P(ServicesApi, TheProfileSaysWhatFaultcpKnowsAndWhere) {
  start();
  Team t = team("acme");
  const std::string path = "/v1/services/" + std::to_string(create(t, service_body(t, "checkout")));
  auto p = call("GET", path + "/profile", t.token);
  ASSERT_EQ(p.status, 200) << p.describe();
  EXPECT_EQ(p.json()["replicas_ready"], 2) << "both agents registered just now: " << p.body;
  EXPECT_EQ(p.json()["replicas"], 2);
  EXPECT_TRUE(p.json()["dependencies"].empty());
  EXPECT_NE(p.json().value("dependencies_source", "").find("none yet"), std::string::npos);
  EXPECT_NE(p.json().value("readiness_source", "").find("polled"), std::string::npos);
  // One agent's kill switch: that instance is not ready.
  ASSERT_EQ(call("POST", "/v1/kill?agent_id=" + std::to_string(t.agent2), t.token).status, 200);
  p = call("GET", path + "/profile", t.token);
  EXPECT_EQ(p.json()["replicas_ready"], 1) << p.body;
  EXPECT_EQ(p.json()["instances"][1]["ready"], false);
  EXPECT_NE(p.json()["instances"][1].value("reason", "").find("kill switch"), std::string::npos) << p.body;
}

TEST_P(ServicesApi, TheSloIsReadFromPrometheus) {
  start();
  Team t = team("acme");
  const std::string path = "/v1/services/" + std::to_string(create(t, service_body(t, "checkout")));
  auto s = call("GET", path + "/slo", t.token);
  ASSERT_EQ(s.status, 200) << s.describe();
  EXPECT_DOUBLE_EQ(s.json()["burn_rate_5m"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(s.json()["burn_rate_1h"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(s.json()["budget_remaining_30d"].get<double>(), 0.8);
  EXPECT_EQ(s.json()["series"]["burn_rate_1h"], "slo:burn_rate1h{service=\"checkout\"}");
  // A service Prometheus has no series of: a 502 naming the query.
  const std::string none = "/v1/services/" + std::to_string(create(t, service_body(t, "unscraped")));
  auto missing = call("GET", none + "/slo", t.token);
  EXPECT_EQ(missing.status, 502) << missing.describe();
  EXPECT_NE(missing.body.find("slo:burn_rate5m{service=\\\"unscraped\\\"}"), std::string::npos) << missing.body;
}

TEST_P(ServicesApi, WithoutPrometheusTheSloIsUnavailableAndTheValidatorRefuses) {
  start(false);
  Team t = team("acme");
  const std::string path = "/v1/services/" + std::to_string(create(t, service_body(t, "checkout")));
  EXPECT_EQ(call("GET", path + "/slo", t.token).status, 503);
  auto v = call("POST", "/v1/validate", t.token, R"({"service":"checkout","fault":"cpu_stress_one","duration_s":60})");
  EXPECT_EQ(codes(v), std::vector<std::string>{"fact_unreadable"}) << v.body;
}

TEST_P(ServicesApi, TheValidatorReadsTheFactsItself) {
  start();
  Team t = team("acme");
  create(t, service_body(t, "checkout"));
  const std::string cpu = R"({"service":"checkout","fault":"cpu_stress_one","duration_s":60})";
  auto ok = call("POST", "/v1/validate", t.token, cpu);
  ASSERT_EQ(ok.status, 200) << ok.describe();
  EXPECT_EQ(ok.json()["ok"], true) << ok.body;
  EXPECT_TRUE(ok.json()["refusals"].empty());

  // A kill: two ready replicas, min_available 1.
  EXPECT_EQ(
      call("POST", "/v1/validate", t.token, R"({"service":"checkout","fault":"process_kill_one","duration_s":60})")
          .json()["ok"],
      true);
  // A dependency fault: nothing observed yet.
  auto dep = call("POST", "/v1/validate", t.token,
                  R"({"service":"checkout","fault":"upstream_delay","target":"10.0.0.9:6379","duration_s":60})");
  EXPECT_EQ(codes(dep), std::vector<std::string>{"not_observed_dependency"}) << dep.body;

  // Outside its window, by the validator's clock.
  clock_->set(tuesday_at(17));
  EXPECT_EQ(codes(call("POST", "/v1/validate", t.token, cpu)), std::vector<std::string>{"outside_window"});
  clock_->set(tuesday_at(10));

  // An experiment queued on an instance's agent: one at a time.
  auto e = call("POST", "/v1/experiments", t.token,
                R"({"agent_id":)" + std::to_string(t.agent1) +
                    R"(,"spec":{"kind":"latency","target":"10.0.0.0/8","delay_ms":100,"duration_sec":30}})");
  ASSERT_EQ(e.status, 201) << e.describe();
  EXPECT_EQ(codes(call("POST", "/v1/validate", t.token, cpu)), std::vector<std::string>{"one_at_a_time"});
  // The kill switch (which also cancels that experiment).
  ASSERT_EQ(call("POST", "/v1/kill", t.token).status, 200);
  EXPECT_EQ(codes(call("POST", "/v1/validate", t.token, cpu)), std::vector<std::string>{"kill_switch"});
  ASSERT_EQ(call("DELETE", "/v1/kill", t.token).status, 200);
  EXPECT_EQ(call("POST", "/v1/validate", t.token, cpu).json()["ok"], true);

  // A service burning its budget, read from Prometheus.
  create(t, service_body(t, "search"));
  auto burning =
      call("POST", "/v1/validate", t.token, R"({"service":"search","fault":"cpu_stress_one","duration_s":60})");
  EXPECT_EQ(codes(burning), std::vector<std::string>{"slo_unhealthy"}) << burning.body;

  // Not opted in, stateful.
  auto quiet = service_body(t, "ledger");
  quiet["chaos"] = "disabled";
  quiet["stateful"] = true;
  create(t, quiet);
  EXPECT_EQ(
      codes(call("POST", "/v1/validate", t.token, R"({"service":"ledger","fault":"cpu_stress_one","duration_s":60})")),
      (std::vector<std::string>{"not_opted_in", "stateful", "fact_unreadable"}))
      << "ledger has no SLO series either";
}

TEST_P(ServicesApi, BadProposalsAreRefusedNamingTheField) {
  start();
  Team t = team("acme");
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"fault":"cpu_stress_one","duration_s":60})", "service"},
           {R"({"service":"checkout","fault":"rm_rf","duration_s":60})", "fault"},
           {R"({"service":"checkout","fault":"upstream_delay","duration_s":60})", "target"},
           {R"({"service":"checkout","fault":"cpu_stress_one","duration_s":0})", "duration_s"},
           {R"({"service":"checkout","fault":"cpu_stress_one","duration_s":"60"})", "duration_s"},
           {R"({"service":"checkout","fault":"cpu_stress_one","duration_s":60,"claims":{"slo":"fine"}})", "claims"},
       }) {
    auto r = call("POST", "/v1/validate", t.token, body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.describe();
    EXPECT_EQ(r.json().value("field", ""), field) << r.describe();
  }
}

TEST_P(ServicesApi, TheCatalogueIsServedAndRenderedToAnExperiment) {
  start();
  Team t = team("acme");
  auto list = call("GET", "/v1/catalogue", t.token);
  ASSERT_EQ(list.status, 200) << list.describe();
  ASSERT_EQ(list.json()["templates"].size(), 6u) << list.describe();
  EXPECT_EQ(list.json()["templates"][0]["sha256"], faultline::catalogue()[0].sha256());
  auto one = call("GET", "/v1/catalogue/cpu_stress_one", t.token);
  ASSERT_EQ(one.status, 200) << one.describe();
  EXPECT_EQ(one.json()["schema"]["additionalProperties"], false);
  EXPECT_EQ(call("GET", "/v1/catalogue/rm_rf", t.token).status, 404);
  EXPECT_EQ(call("GET", "/v1/catalogue").status, 401) << "a token is needed";

  const json good = {{"params", {{"target", "10.0.0.7:5432"}, {"latency_ms", 200}, {"duration_s", 60}}},
                     {"cgroup", "/app.slice/a"}};
  auto r = call("POST", "/v1/catalogue/upstream_delay/render", t.token, good.dump());
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json()["template_sha256"], faultline::find_template("upstream_delay")->sha256());
  EXPECT_EQ(r.json()["experiment"]["kind"], "tcp") << r.describe();
  EXPECT_EQ(r.json()["experiment"]["toxic"], json::array({"latency=200ms"})) << r.describe();
  // What it renders is an experiment faultcp itself takes.
  auto e =
      call("POST", "/v1/experiments", t.token, json{{"agent_id", t.agent1}, {"spec", r.json()["experiment"]}}.dump());
  EXPECT_EQ(e.status, 201) << e.describe();

  for (const auto& [body, field] : std::vector<std::pair<json, std::string>>{
           {{{"params", {{"target", "10.0.0.7:5432"}, {"latency_ms", 900}, {"duration_s", 60}}}, {"cgroup", "/a"}},
            "params.latency_ms"},
           {{{"params", {{"target", "10.0.0.7:5432"}, {"latency_ms", 200}, {"duration_s", 60}, {"x", 1}}},
             {"cgroup", "/a"}},
            "params.x"},
           {{{"params", {{"target", "10.0.0.7:5432"}, {"latency_ms", 200}, {"duration_s", 60}}}}, "cgroup"},
           {{{"params", "latency"}, {"cgroup", "/a"}}, "params"},
           {{{"params", json::object()}, {"cgroup", "/a"}, {"run", "r1"}}, "run"},
       }) {
    auto bad = call("POST", "/v1/catalogue/upstream_delay/render", t.token, body.dump());
    EXPECT_EQ(bad.status, 400) << body.dump() << " -> " << bad.describe();
    EXPECT_EQ(bad.json().value("field", ""), field) << bad.describe();
  }
  auto range =
      call("POST", "/v1/catalogue/upstream_delay/render", t.token,
           json{{"params", {{"target", "10.0.0.7:5432"}, {"latency_ms", 900}, {"duration_s", 60}}}, {"cgroup", "/a"}}
               .dump());
  EXPECT_NE(range.json().value("error", "").find("900 is out of range 20-500"), std::string::npos) << range.describe();
}

// The faultcp binary: its Prometheus flags refused when bad (exit 2, nothing
// served), and used when good: a service's SLO read through --prometheus-url.
TEST_P(ServicesApi, TheFaultcpBinaryReadsTheSloWhereItIsTold) {
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--prometheus-url", "ftp://127.0.0.1:9090"},
                                                        {"--prometheus-url", "http://127.0.0.1:9090/?x=1"},
                                                        {"--prometheus-timeout-ms", "50"},
                                                        {"--prometheus-timeout-ms", "20000"}}) {
    auto bad = fltest::run_command({FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database",
                                    "sqlite:/nonexistent-dir-never-made/x.db", flag, value},
                                   {}, 10s);
    EXPECT_TRUE(bad.status.is(2)) << flag << " " << value << ": " << bad.describe();
    EXPECT_NE(bad.err.find(flag), std::string::npos) << bad.err;
  }
  fltest::TestDatabase db(GetParam());
  auto cp = fltest::ChildProcess::spawn(
      {FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database", db.url(), "--prometheus-url", prom_->url()});
  auto line = cp.wait_line_starting("faultcp: listening on", 20s);
  ASSERT_TRUE(line.has_value()) << cp.describe();
  const auto at = line->find("127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << *line;
  const auto port = static_cast<uint16_t>(std::stoul(line->substr(at + 10)));
  auto signup = fltest::cp_request(port, "POST", "/v1/auth/signup", "",
                                   R"({"email":"a@example.com","password":"correct horse battery","workspace":"w"})");
  ASSERT_EQ(signup.status, 201) << signup.describe();
  const std::string token = signup.json().value("token", "");
  auto svc = fltest::cp_request(port, "POST", "/v1/services", token, R"({"name":"search","instances":[]})");
  ASSERT_EQ(svc.status, 201) << svc.describe();
  auto slo =
      fltest::cp_request(port, "GET", "/v1/services/" + std::to_string(svc.json().value("id", 0)) + "/slo", token);
  ASSERT_EQ(slo.status, 200) << slo.describe();
  EXPECT_DOUBLE_EQ(slo.json()["burn_rate_1h"].get<double>(), 1.7);
  EXPECT_EQ(slo.json()["prometheus"], prom_->url());
  cp.signal(SIGTERM);
  auto st = cp.wait(10s);
  ASSERT_TRUE(st.has_value()) << cp.describe();
  EXPECT_TRUE(st->is(0)) << cp.describe();
}

INSTANTIATE_TEST_SUITE_P(Backends, ServicesApi, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

}  // namespace
}  // namespace florch
