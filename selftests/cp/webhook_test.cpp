// Webhooks on both backends: outbound events reach a real HTTP receiver on
// loopback signed (HMAC-SHA256 over "TIMESTAMP.BODY"), retried after a 500,
// held back by the per-trigger cooldown; an inbound Alertmanager alert aborts
// the experiments it names, and a bad signature, a stale timestamp, a replay
// or the wrong workspace is refused naming what is wrong, with nothing aborted.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <mutex>

#include "cp/auth/crypto.h"
#include "cp_client.h"
#include "hook_receiver.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/test_cert.h"

namespace {

using fltest::Backend;
using fltest::HookReceiver;
using nlohmann::json;
using namespace std::chrono_literals;

const char* kHookSecret = "outbound-secret-0123456789";
const char* kAlertSecret = "alert-secret-abcdefghijklmnop";

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class WebhookTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    auto config = fltest::test_config();
    config.webhook_retry.first_backoff = 50ms;
    config.webhook_retry.max_attempts = 3;
    config.webhook_retry.timeout = 2s;
    server_ = std::make_unique<fltest::CpServer>(GetParam(), config);
  }
  fltest::CpReply call(const std::string& method, const std::string& path, const std::string& token = "",
                       const std::string& body = "") {
    return server_->call(method, path, token, body);
  }
  // A workspace's session token.
  std::string signup(const std::string& name) {
    auto r =
        call("POST", "/v1/auth/signup", "",
             json{{"email", name + "@example.com"}, {"password", "correct horse battery"}, {"workspace", name}}.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    return r.json().value("token", "");
  }
  // An agent of the workspace: its id and token.
  std::pair<int64_t, std::string> enroll(const std::string& token, const std::string& hostname) {
    auto enr = call("POST", "/v1/tokens", token, R"({"kind":"enrollment"})");
    auto reg = call("POST", "/v1/agents/register", enr.json().value("token", ""),
                    json{{"hostname", hostname}, {"kernel", "6.1.0"}}.dump());
    EXPECT_EQ(reg.status, 201) << reg.describe();
    return {reg.json().value("agent_id", int64_t{0}), reg.json().value("token", "")};
  }
  int64_t experiment(const std::string& token, int64_t agent) {
    auto r = call(
        "POST", "/v1/experiments", token,
        json{{"agent_id", agent}, {"spec", {{"kind", "loss"}, {"target", "10.0.0.1"}, {"duration_sec", 30}}}}.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    return r.json().value("id", int64_t{0});
  }
  std::vector<json> audit_actions(const std::string& token, const std::string& action) {
    std::vector<json> out;
    const json bundle = call("GET", "/v1/audit/export", token).json();
    for (const auto& e : bundle["entries"])
      if (e["action"] == action) out.push_back(e);
    return out;
  }
  // An alert signed as an Alertmanager relay would: TIMESTAMP.BODY under `secret`.
  fltest::CpReply post_alert(const std::string& workspace, const json& body, const std::string& secret,
                             int64_t ts = unix_now()) {
    const std::string text = body.dump();
    return fltest::cp_request(server_->port(), "POST", "/webhooks/alert?workspace=" + workspace, "", text, 10'000,
                              {{"X-Faultline-Timestamp", std::to_string(ts)},
                               {"X-Faultline-Signature",
                                "sha256=" + faultline::cp::hmac_sha256_hex(secret, std::to_string(ts) + "." + text)}});
  }
  static json alertmanager(const json& labels, const std::string& status = "firing") {
    return {{"version", "4"},
            {"groupKey", "{}:{alertname=\"HighErrorRate\"}"},
            {"truncatedAlerts", 0},
            {"status", status},
            {"receiver", "faultline"},
            {"groupLabels", {{"alertname", "HighErrorRate"}}},
            {"commonLabels", labels},
            {"commonAnnotations", json::object()},
            {"externalURL", "http://alertmanager:9093"},
            {"alerts",
             {{{"status", status},
               {"labels", labels},
               {"annotations", {{"summary", "5xx over 5%"}}},
               {"startsAt", "2026-01-01T00:00:00Z"},
               {"endsAt", "0001-01-01T00:00:00Z"},
               {"generatorURL", "http://prometheus:9090/graph"},
               {"fingerprint", "c2a4b1f0e5d6a7b8"}}}}};
  }
  std::unique_ptr<fltest::CpServer> server_;
};

void expect_signed(const faultline::HttpRequest& r, const std::string& secret) {
  const auto ts = r.header("x-faultline-timestamp");
  const auto sig = r.header("x-faultline-signature");
  ASSERT_TRUE(ts && sig) << "no timestamp or signature header";
  EXPECT_LE(std::abs(std::stoll(*ts) - unix_now()), 5) << *ts;
  EXPECT_EQ(*sig, "sha256=" + faultline::cp::hmac_sha256_hex(secret, *ts + "." + r.body)) << "signature of " << r.body;
}

TEST_P(WebhookTest, EventsAreSignedRetriedAfterA500AndCooledDownPerTrigger) {
  HookReceiver hook(/*fail_first=*/1);
  const auto token = signup("hooks");
  auto put = call("PUT", "/v1/webhooks", token,
                  json{{"url", hook.url()},
                       {"secret", kHookSecret},
                       {"triggers", {"experiment.start", "experiment.abort", "kill"}},
                       {"cooldown_sec", 60}}
                      .dump());
  ASSERT_EQ(put.status, 200) << put.describe();
  EXPECT_EQ(put.body.find(kHookSecret), std::string::npos) << "the secret was echoed: " << put.body;
  auto got = call("GET", "/v1/webhooks", token).json()["webhook"];
  EXPECT_EQ(got["url"], hook.url());
  EXPECT_EQ(got["secret_set"], true);

  auto [agent, agent_token] = enroll(token, "web-1");
  const int64_t first = experiment(token, agent);
  const std::string base = "/v1/agents/" + std::to_string(agent);
  ASSERT_EQ(call("GET", base + "/next?wait_ms=0", agent_token).json()["experiment"]["id"], first);
  const auto started = std::chrono::steady_clock::now();
  auto ev = call("POST", base + "/events", agent_token, json{{"experiment_id", first}, {"type", "running"}}.dump());
  ASSERT_EQ(ev.status, 200) << ev.describe();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s) << "the event's answer waited for the webhook";

  // The first attempt met a 500; the retry (50 ms later) was taken.
  auto reqs = hook.wait_for(2);
  ASSERT_EQ(reqs.size(), 2u);
  for (const auto& r : reqs) {
    expect_signed(r, kHookSecret);
    EXPECT_EQ(r.header("x-faultline-trigger"), "experiment.start");
    auto body = json::parse(r.body);
    EXPECT_EQ(body["source"], "faultcp");
    EXPECT_EQ(body["trigger"], "experiment.start");
    EXPECT_EQ(body["fields"]["experiment_id"], first);
    EXPECT_EQ(body["fields"]["hostname"], "web-1");
    for (const char* k : {"title", "text", "sent_at"}) EXPECT_TRUE(body[k].is_string()) << k << " in " << r.body;
  }
  for (int i = 0; i < 100 && audit_actions(token, "webhook.delivered").empty(); ++i) std::this_thread::sleep_for(20ms);
  auto delivered = audit_actions(token, "webhook.delivered");
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(json::parse(delivered[0]["detail"].get<std::string>())["attempts"], 2);

  // experiment.abort twice within its cooldown: one delivery, one suppressed.
  ASSERT_EQ(call("POST", "/v1/experiments/" + std::to_string(first) + "/abort", token).status, 200);
  const int64_t second = experiment(token, agent);
  ASSERT_EQ(call("POST", "/v1/experiments/" + std::to_string(second) + "/abort", token).status, 200);
  // The kill switch is another trigger: not held back by the abort's cooldown.
  ASSERT_EQ(call("POST", "/v1/kill", token).status, 200);
  reqs = hook.wait_for(4);
  std::this_thread::sleep_for(300ms);
  reqs = hook.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[2].header("x-faultline-trigger"), "experiment.abort");
  EXPECT_EQ(json::parse(reqs[2].body)["fields"]["experiment_id"], first);
  EXPECT_EQ(reqs[3].header("x-faultline-trigger"), "kill");
  expect_signed(reqs[3], kHookSecret);
  EXPECT_EQ(audit_actions(token, "webhook.suppressed").size(), 1u);
  EXPECT_EQ(call("POST", "/v1/audit/verify", token).json()["ok"], true);
}

TEST_P(WebhookTest, AReceiverThatKeepsFailingIsRetriedThenReportedFailed) {
  HookReceiver hook(/*fail_first=*/100);
  const auto token = signup("failing");
  ASSERT_EQ(call("PUT", "/v1/webhooks", token,
                 json{{"url", hook.url()}, {"secret", kHookSecret}, {"triggers", {"kill"}}}.dump())
                .status,
            200);
  ASSERT_EQ(call("POST", "/v1/kill", token).status, 200);
  EXPECT_EQ(hook.wait_for(3).size(), 3u);  // max_attempts
  for (int i = 0; i < 100 && audit_actions(token, "webhook.failed").empty(); ++i) std::this_thread::sleep_for(20ms);
  auto failed = audit_actions(token, "webhook.failed");
  ASSERT_EQ(failed.size(), 1u);
  auto detail = json::parse(failed[0]["detail"].get<std::string>());
  EXPECT_EQ(detail["attempts"], 3);
  EXPECT_EQ(detail["status"], 500);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(hook.requests().size(), 3u) << "retried beyond max_attempts";
}

TEST_P(WebhookTest, ABadConfigurationIsRefusedNamingTheFieldAndNothingIsStored) {
  const auto token = signup("badhooks");
  const json good{{"url", "http://127.0.0.1:9/x"}, {"secret", kHookSecret}, {"triggers", {"kill"}}};
  struct Case {
    json body;
    std::string field;
  };
  std::vector<Case> cases = {
      {json{{"url", "ftp://x/"}, {"secret", kHookSecret}, {"triggers", {"kill"}}}, "url"},
      {json{{"url", "http://user@x/"}, {"secret", kHookSecret}, {"triggers", {"kill"}}}, "url"},
      {json{{"url", "http://x:99999/"}, {"secret", kHookSecret}, {"triggers", {"kill"}}}, "url"},
      {json{{"url", "http://x/"}, {"secret", "short"}, {"triggers", {"kill"}}}, "secret"},
      {json{{"url", "http://x/"}, {"secret", kHookSecret}, {"triggers", {"nope"}}}, "triggers[0]"},
      {json{{"url", "http://x/"}, {"secret", kHookSecret}, {"triggers", {"kill", "kill"}}}, "triggers[1]"},
      {json{{"url", "http://x/"}, {"secret", kHookSecret}, {"triggers", "kill"}}, "triggers"},
      {json{{"url", "http://x/"}, {"secret", kHookSecret}, {"triggers", {"kill"}}, {"cooldown_sec", -1}},
       "cooldown_sec"},
      {json{{"url", "http://x/"}, {"secret", kHookSecret}, {"triggers", {"kill"}}, {"alert_secret", kHookSecret}},
       "alert_secret"},
      {json{{"url", "http://x/"}, {"secret", kHookSecret}, {"triggers", {"kill"}}, {"extra", 1}}, "extra"},
      {json{{"secret", kHookSecret}, {"triggers", {"kill"}}}, "url"},
  };
  for (const auto& c : cases) {
    auto r = call("PUT", "/v1/webhooks", token, c.body.dump());
    EXPECT_EQ(r.status, 400) << c.body << " -> " << r.describe();
    EXPECT_EQ(r.json()["field"], c.field) << c.body << " -> " << r.describe();
  }
  EXPECT_EQ(call("PUT", "/v1/webhooks", token, "{not json").status, 400);
  EXPECT_TRUE(call("GET", "/v1/webhooks", token).json()["webhook"].is_null()) << "a refused configuration was stored";
  EXPECT_EQ(call("PUT", "/v1/webhooks", "", good.dump()).status, 401);
}

TEST_P(WebhookTest, AnAlertAbortsTheExperimentsItNames) {
  const auto token = signup("alerts");
  ASSERT_EQ(call("PUT", "/v1/webhooks", token,
                 json{{"url", "http://127.0.0.1:9/unused"},
                      {"secret", kHookSecret},
                      {"alert_secret", kAlertSecret},
                      {"triggers", json::array()}}
                     .dump())
                .status,
            200);
  auto [a1, t1] = enroll(token, "web-1");
  auto [a2, t2] = enroll(token, "web-2");
  const int64_t e1 = experiment(token, a1), e2 = experiment(token, a2);
  ASSERT_EQ(call("GET", "/v1/agents/" + std::to_string(a1) + "/next?wait_ms=0", t1).json()["experiment"]["id"], e1);

  // A resolved alert aborts nothing.
  auto resolved = post_alert("alerts", alertmanager({{"alertname", "HighErrorRate"}}, "resolved"), kAlertSecret);
  ASSERT_EQ(resolved.status, 200) << resolved.describe();
  EXPECT_EQ(resolved.json()["aborted"], json::array());

  auto r = post_alert("alerts", alertmanager({{"alertname", "HighErrorRate"}, {"hostname", "web-1"}}), kAlertSecret);
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json()["aborted"], json::array({e1}));
  auto one = call("GET", "/v1/experiments/" + std::to_string(e1), token).json();
  EXPECT_EQ(one["status"], "cancelled");
  EXPECT_NE(one["detail"].get<std::string>().find("HighErrorRate"), std::string::npos) << one;
  EXPECT_EQ(call("GET", "/v1/experiments/" + std::to_string(e2), token).json()["status"], "queued");
  // The agent holding e1 is told to stop it.
  EXPECT_EQ(call("GET", "/v1/agents/" + std::to_string(a1) + "/next?wait_ms=0", t1).json()["stop"], json::array({e1}));
  // Labelled with nothing of ours: the whole workspace.
  auto all = post_alert("alerts", alertmanager({{"alertname", "SiteDown"}}), kAlertSecret);
  ASSERT_EQ(all.status, 200) << all.describe();
  EXPECT_EQ(all.json()["aborted"], json::array({e2}));
  EXPECT_EQ(audit_actions(token, "alert.received").size(), 3u);
  EXPECT_EQ(call("POST", "/v1/audit/verify", token).json()["ok"], true);
}

TEST_P(WebhookTest, ABadAlertIsRefusedNamingWhatIsWrongAndAbortsNothing) {
  const auto token = signup("victim");
  const auto other = signup("other");
  for (const auto& [t, secret] : {std::pair{token, kAlertSecret}, std::pair{other, "other-alert-secret-0123456"}})
    ASSERT_EQ(call("PUT", "/v1/webhooks", t,
                   json{{"url", "http://127.0.0.1:9/x"},
                        {"secret", kHookSecret},
                        {"alert_secret", secret},
                        {"triggers", json::array()}}
                       .dump())
                  .status,
              200);
  auto [agent, agent_token] = enroll(token, "web-1");
  const int64_t e = experiment(token, agent);
  const json body = alertmanager({{"alertname", "HighErrorRate"}});
  struct Case {
    std::string what;
    fltest::CpReply reply;
    int status;
    std::string field;
  };
  const std::string text = body.dump();
  const int64_t now = unix_now();
  std::vector<Case> cases;
  cases.push_back(
      {"bad signature", post_alert("victim", body, "not-the-secret-at-all-000"), 401, "X-Faultline-Signature"});
  cases.push_back(
      {"stale timestamp", post_alert("victim", body, kAlertSecret, now - 120), 401, "X-Faultline-Timestamp"});
  cases.push_back(
      {"future timestamp", post_alert("victim", body, kAlertSecret, now + 120), 401, "X-Faultline-Timestamp"});
  cases.push_back({"signed for another workspace", post_alert("victim", body, "other-alert-secret-0123456"), 401,
                   "X-Faultline-Signature"});
  cases.push_back({"no such workspace", post_alert("nowhere", body, kAlertSecret), 404, "workspace"});
  cases.push_back({"no workspace named", fltest::cp_request(server_->port(), "POST", "/webhooks/alert", "", text), 400,
                   "workspace"});
  cases.push_back({"no signature",
                   fltest::cp_request(server_->port(), "POST", "/webhooks/alert?workspace=victim", "", text, 10'000,
                                      {{"X-Faultline-Timestamp", std::to_string(now)}}),
                   401, "X-Faultline-Signature"});
  cases.push_back({"no timestamp",
                   fltest::cp_request(server_->port(), "POST", "/webhooks/alert?workspace=victim", "", text), 401,
                   "X-Faultline-Timestamp"});
  cases.push_back({"not Alertmanager's shape",
                   post_alert("victim", json{{"alerts", {{{"labels", {{"a", 1}}}}}}}, kAlertSecret), 400,
                   "alerts[0].labels.a"});
  cases.push_back({"no alerts", post_alert("victim", json{{"status", "firing"}}, kAlertSecret), 400, "alerts"});
  cases.push_back(
      {"an unknown member", post_alert("victim", json{{"alerts", json::array()}, {"x", 1}}, kAlertSecret), 400, "x"});
  for (const auto& c : cases) {
    EXPECT_EQ(c.reply.status, c.status) << c.what << ": " << c.reply.describe();
    EXPECT_EQ(c.reply.json()["field"], c.field) << c.what << ": " << c.reply.describe();
  }
  EXPECT_EQ(call("GET", "/v1/experiments/" + std::to_string(e), token).json()["status"], "queued")
      << "a refused alert aborted an experiment";

  // A good alert is taken once; the same bytes and signature again are a replay.
  const std::string sig = "sha256=" + faultline::cp::hmac_sha256_hex(kAlertSecret, std::to_string(now) + "." + text);
  const std::vector<std::pair<std::string, std::string>> headers = {{"X-Faultline-Timestamp", std::to_string(now)},
                                                                    {"X-Faultline-Signature", sig}};
  auto taken =
      fltest::cp_request(server_->port(), "POST", "/webhooks/alert?workspace=victim", "", text, 10'000, headers);
  EXPECT_EQ(taken.status, 200) << taken.describe();
  auto replay =
      fltest::cp_request(server_->port(), "POST", "/webhooks/alert?workspace=victim", "", text, 10'000, headers);
  EXPECT_EQ(replay.status, 409) << replay.describe();
  EXPECT_EQ(replay.json()["field"], "X-Faultline-Signature") << replay.describe();
  EXPECT_NE(replay.json()["error"].get<std::string>().find("replay"), std::string::npos) << replay.describe();
  EXPECT_EQ(audit_actions(token, "alert.received").size(), 1u);
  EXPECT_GE(audit_actions(token, "alert.refused").size(), 6u);
  EXPECT_TRUE(audit_actions(other, "alert.received").empty());
}

// https://: the sender verifies the receiver's certificate against the CA
// store (here SSL_CERT_FILE, a certificate made for the test) and its name.
TEST(WebhookTls, AnHttpsReceiverGetsTheSignedEvent) {
  char tmpl[] = "/tmp/fl-cp-hook-tls-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, cert = dir + "/cert.pem", key = dir + "/key.pem";
  auto made = fltest::make_self_signed_cert(cert, key, "127.0.0.1");
  ASSERT_TRUE(made.status.is(0)) << made.describe();
  auto tls = faultline::HttpTlsContext::load(cert, key);
  ASSERT_TRUE(tls.ok()) << tls.error().describe();
  ::signal(SIGPIPE, SIG_IGN);
  ::setenv("SSL_CERT_FILE", cert.c_str(), 1);
  {
    HookReceiver hook(0, *tls);
    auto config = fltest::test_config();
    config.webhook_retry.max_attempts = 1;
    fltest::CpServer server(fltest::Backend::Sqlite, config);
    auto signup = server.call("POST", "/v1/auth/signup", "",
                              R"({"email":"t@example.com","password":"correct horse battery","workspace":"t"})");
    const std::string token = signup.json().value("token", "");
    ASSERT_EQ(server
                  .call("PUT", "/v1/webhooks", token,
                        json{{"url", hook.url()}, {"secret", kHookSecret}, {"triggers", {"kill"}}}.dump())
                  .status,
              200);
    ASSERT_EQ(server.call("POST", "/v1/kill", token).status, 200);
    auto reqs = hook.wait_for(1);
    ASSERT_EQ(reqs.size(), 1u) << "no delivery over https";
    expect_signed(reqs[0], kHookSecret);
    EXPECT_EQ(json::parse(reqs[0].body)["trigger"], "kill");
    // A certificate the CA store does not vouch for: nothing is sent, the
    // failure is in the activity log.
    ::unsetenv("SSL_CERT_FILE");
    ASSERT_EQ(server.call("DELETE", "/v1/kill", token).status, 200);
    ASSERT_EQ(server.call("POST", "/v1/kill", token).status, 200);
    std::string error;
    for (int i = 0; i < 200 && error.empty(); ++i) {
      std::this_thread::sleep_for(20ms);
      const json bundle = server.call("GET", "/v1/audit/export", token).json();
      for (const auto& e : bundle["entries"])
        if (e["action"] == "webhook.failed") error = json::parse(e["detail"].get<std::string>()).value("error", "");
    }
    EXPECT_NE(error.find("TLS"), std::string::npos) << "an unverified receiver was not refused: '" << error << "'";
    EXPECT_EQ(hook.requests().size(), 1u);
  }
  ::unsetenv("SSL_CERT_FILE");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Backends, WebhookTest, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

}  // namespace
