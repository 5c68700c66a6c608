// The guard's alerts on both backends, delivered to a real HTTP receiver on
// loopback: a finding of the activity log raises one signed alert per
// trigger; the cooldown holds the next ones back and the next one sent says
// how many; the Slack format; a secret planted in an entry never reaches a
// body; the test routes; the digest's counts and its schedule; bad settings
// refused naming the field. And the trigger of each kind of entry.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>

#include "cp/auth/crypto.h"
#include "cp/webhooks/slack_message.h"
#include "cp_client.h"
#include "hook_receiver.h"
#include "selftests/lib/child_process.h"
#include "userspace/guard/activity_log.h"
#include "userspace/orchestration/clock.h"

// A named namespace: cp_tests compiles as one unity batch.
namespace guard_alerts_test {

using fltest::Backend;
using nlohmann::json;
using namespace std::chrono_literals;

const char* kSecret = "alerts-secret-0123456789";
// Planted in entries: a real-looking AWS key id and a bearer token.
const char* kPlantedKey = "AKIAQYLPMN5HHHFPZAM2";
const char* kPlantedToken = "ghp_R3aLl00kingT0kenValue0123456789abcd";

// The digest's clock, moved by the test while faultcp reads it.
class SteppedClock final : public faultline::Clock {
 public:
  explicit SteppedClock(int64_t s) : s_(s) {}
  [[nodiscard]] int64_t now_unix_s() const override { return s_.load(); }
  void set(int64_t s) { s_.store(s); }

 private:
  std::atomic<int64_t> s_;
};

std::string rfc3339_of(int64_t ms) {
  const time_t s = static_cast<time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&s, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One entry as the guard writes it, the chain kept per identity.
struct Finding {
  std::string identity, kind, verdict, rule;
  std::string host = "api.example.com", path = "/v1/things";
};

class GuardAlertsTest : public ::testing::TestWithParam<Backend> {
 protected:
  void start(std::shared_ptr<const faultline::Clock> digest_clock = nullptr) {
    auto config = fltest::test_config();
    config.webhook_retry.first_backoff = 50ms;
    config.webhook_retry.max_attempts = 3;
    config.webhook_retry.timeout = 2s;
    config.digest_check = 100ms;
    config.digest_clock = std::move(digest_clock);
    server_ = std::make_unique<fltest::CpServer>(GetParam(), config);
    auto r =
        call("POST", "/v1/auth/signup", "",
             json{{"email", "ops@example.com"}, {"password", "correct horse battery"}, {"workspace", "acme"}}.dump());
    ASSERT_EQ(r.status, 201) << r.describe();
    token_ = r.json().value("token", "");
    auto enr = call("POST", "/v1/tokens", token_, R"({"kind":"enrollment"})").json().value("token", "");
    auto reg = call("POST", "/v1/agents/register", enr, R"({"hostname":"guard-1"})");
    ASSERT_EQ(reg.status, 201) << reg.describe();
    guard_ = reg.json().value("token", "");
  }
  fltest::CpReply call(const std::string& method, const std::string& path, const std::string& token = "",
                       const std::string& body = "") {
    return server_->call(method, path, token, body);
  }
  void put_alerts(const json& settings) {
    auto r = call("PUT", "/v1/guardrails/alerts", token_, settings.dump());
    ASSERT_EQ(r.status, 200) << r.describe();
  }
  void post(const std::vector<Finding>& findings, int64_t at_ms = unix_now_ms()) {
    json list = json::array();
    for (const auto& f : findings) {
      auto& head = heads_[f.identity];
      faultline::ActivityEntry e;
      e.seq = ++head.first;
      e.ts = rfc3339_of(at_ms);
      e.identity = f.identity;
      e.kind = f.kind;
      e.method = "POST";
      e.host = f.host;
      e.path = f.path;
      e.verdict = f.verdict;
      e.rule = f.rule;
      e.prev = head.second;
      e.hash = faultline::activity_hash(e);
      head.second = e.hash;
      list.push_back(json::parse(faultline::activity_line(e)));
    }
    auto r = call("POST", "/v1/guardrails/activity", guard_, json{{"entries", list}}.dump());
    ASSERT_EQ(r.status, 200) << r.describe();
    ASSERT_EQ(r.json()["stored"], findings.size()) << r.describe();
  }
  std::unique_ptr<fltest::CpServer> server_;
  std::string token_, guard_;
  std::map<std::string, std::pair<uint64_t, std::string>> heads_;
};

void expect_signed(const faultline::HttpRequest& r) {
  const auto ts = r.header("x-faultline-timestamp");
  const auto sig = r.header("x-faultline-signature");
  ASSERT_TRUE(ts && sig) << "no timestamp or signature header";
  EXPECT_EQ(*sig, "sha256=" + faultline::cp::hmac_sha256_hex(kSecret, *ts + "." + r.body)) << "signature of " << r.body;
}

std::vector<std::string> triggers_of(const std::vector<faultline::HttpRequest>& reqs) {
  std::vector<std::string> out;
  for (const auto& r : reqs) out.push_back(r.header("x-faultline-trigger").value_or("?"));
  return out;
}

const Finding kBlocked{"alice@build-7", "request", "deny", "no-prod-writes"};
const Finding kDlp{"alice@build-7", "dlp", "allow", "dlp-redact"};
const Finding kHoney{"bob@ci", "honeytoken", "deny", "honeytoken/aws_access_key"};
const Finding kAllowed{"alice@build-7", "request", "allow", ""};

TEST_P(GuardAlertsTest, FindingsRaiseSignedAlertsAndTheCooldownCountsWhatItHeldBack) {
  start();
  fltest::HookReceiver hook;
  put_alerts({{"url", hook.url()},
              {"secret", kSecret},
              {"triggers", {"blocked", "dlp", "honeytoken"}},
              {"cooldown_sec", 3},
              {"cooldowns", {{"dlp", 0}}}});
  const json got = call("GET", "/v1/guardrails/alerts", token_).json()["alerts"];
  EXPECT_EQ(got["secret_set"], true);
  EXPECT_EQ(got.dump().find(kSecret), std::string::npos) << "the secret was shown: " << got.dump();
  EXPECT_EQ(got["cooldowns"], (json{{"blocked", 3}, {"dlp", 0}, {"honeytoken", 3}}));
  EXPECT_EQ(got["sends_as"], "faultline");

  // Three blocks in one batch: one alert, two held back. An allowed request
  // raises nothing; dlp (cooldown 0) and the honeytoken one each.
  post({kBlocked, kBlocked, kAllowed, kDlp, kBlocked, kHoney, kDlp});
  auto reqs = hook.wait_for(4, 300ms);
  ASSERT_EQ(triggers_of(reqs), (std::vector<std::string>{"blocked", "dlp", "honeytoken", "dlp"}));
  for (const auto& r : reqs) {
    expect_signed(r);
    const json body = json::parse(r.body);
    for (const char* k : {"source", "trigger", "title", "text", "sent_at"}) EXPECT_TRUE(body[k].is_string()) << k;
    EXPECT_EQ(body["source"], "faultcp");
    EXPECT_TRUE(body["fields"].is_object());
  }
  const json blocked = json::parse(reqs[0].body);
  EXPECT_EQ(blocked["fields"]["rule"], "no-prod-writes");
  EXPECT_EQ(blocked["fields"]["identity"], "alice@build-7");
  EXPECT_EQ(blocked["fields"]["suppressed"], 0);
  const json honey = json::parse(reqs[2].body);
  EXPECT_EQ(honey["trigger"], "honeytoken");
  EXPECT_EQ(honey["fields"]["finding"], "aws_access_key");

  // After the cooldown the next block goes, saying two were held back.
  std::this_thread::sleep_for(3500ms);
  post({kBlocked});
  reqs = hook.wait_for(5, 300ms);
  ASSERT_EQ(reqs.size(), 5u);
  const json next = json::parse(reqs[4].body);
  EXPECT_EQ(next["trigger"], "blocked");
  EXPECT_EQ(next["fields"]["suppressed"], 2);
  EXPECT_NE(next["text"].get<std::string>().find("2 more blocked alerts were held back"), std::string::npos)
      << next["text"];

  // A path over 200 bytes is cut between characters (a 2-byte one spans byte 200).
  Finding long_path = kDlp;
  long_path.path = "/" + std::string(198, 'a') + "\xc3\xa9\xc3\xa9/rest";
  post({long_path});
  reqs = hook.wait_for(6, 300ms);
  ASSERT_EQ(reqs.size(), 6u) << "no alert for the long path";
  const json cut = json::parse(reqs[5].body);
  EXPECT_EQ(cut["fields"]["path"], "/" + std::string(198, 'a') + "...");
}

TEST_P(GuardAlertsTest, ASlackUrlGetsSlacksMessageAndNoPlantedSecretReachesAnyBody) {
  start();
  fltest::HookReceiver hook;
  // The format a hooks.slack.com URL gets by itself (never posted to).
  auto slack = call("PUT", "/v1/guardrails/alerts", token_,
                    json{{"url", "https://hooks.slack.com/services/T000/B000/abc123"}, {"triggers", {"dlp"}}}.dump());
  ASSERT_EQ(slack.status, 200) << slack.describe();
  EXPECT_EQ(slack.json()["alerts"]["sends_as"], "slack");
  EXPECT_EQ(slack.json()["alerts"]["secret_set"], false);

  put_alerts({{"url", hook.url()},
              {"secret", kSecret},
              {"format", "slack"},
              {"triggers", {"blocked", "dlp", "response_threat"}},
              {"cooldown_sec", 0}});
  const std::string query = std::string("?access_key=") + kPlantedKey + "&token=" + kPlantedToken;
  Finding dlp = kDlp;
  dlp.path = "/v1/upload" + query;
  Finding blocked = kBlocked;
  blocked.host = "evil.example.net";
  blocked.path = std::string("/collect/api_key=") + kPlantedToken + query;
  Finding answer{"alice@build-7", "response_threat", "allow", "response-guard/aws_access_key"};
  post({dlp, blocked, answer});
  auto reqs = hook.wait_for(3, 300ms);
  ASSERT_EQ(reqs.size(), 3u);
  ASSERT_EQ(call("POST", "/v1/guardrails/digest/test", token_).status, 202);
  reqs = hook.wait_for(4, 300ms);
  ASSERT_EQ(reqs.size(), 4u);
  for (const auto& r : reqs) {
    expect_signed(r);
    for (const char* secret : {kPlantedKey, kPlantedToken})
      EXPECT_EQ(r.body.find(secret), std::string::npos) << "a planted secret in " << r.body;
    const json body = json::parse(r.body);
    EXPECT_TRUE(body["text"].is_string()) << r.body;
    EXPECT_FALSE(body.contains("source")) << "not Slack's shape: " << r.body;
    ASSERT_TRUE(body["blocks"].is_array() && body["blocks"].size() >= 2) << r.body;
    EXPECT_EQ(body["blocks"][0]["type"], "header");
    EXPECT_EQ(body["blocks"][0]["text"]["type"], "plain_text");
    EXPECT_EQ(body["blocks"].back()["type"], "context");
  }
  const json first = json::parse(reqs[0].body);
  EXPECT_NE(first["blocks"][0]["text"]["text"].get<std::string>().find("DLP finding"), std::string::npos)
      << reqs[0].body;
  const json fields = first["blocks"][2]["fields"];
  ASSERT_TRUE(fields.is_array()) << reqs[0].body;
  EXPECT_NE(fields.dump().find("*path*\\n/v1/upload?..."), std::string::npos) << fields.dump();
  // The alerts' own audit entries (settings, deliveries): never a secret.
  const json exported = call("GET", "/v1/audit/export", token_).json();
  size_t alert_entries = 0;
  for (const auto& e : exported["entries"]) {
    const std::string action = e["action"];
    if (!action.starts_with("webhook.") && !action.starts_with("guardrail.alerts") &&
        !action.starts_with("guardrail.digest"))
      continue;
    ++alert_entries;
    for (const char* secret : {kPlantedKey, kPlantedToken, kSecret})
      EXPECT_EQ(e.dump().find(secret), std::string::npos) << "a secret in " << e.dump();
  }
  EXPECT_GE(alert_entries, 3u);
}

TEST_P(GuardAlertsTest, TheTestRoutesSendNowAndTheDigestCountsTriggersRulesAndIdentities) {
  start();
  fltest::HookReceiver hook;
  EXPECT_EQ(call("POST", "/v1/guardrails/alerts/test", token_).status, 409) << "no settings yet";
  put_alerts({{"url", hook.url()}, {"secret", kSecret}, {"triggers", json::array()}, {"digest", "weekly"}});
  auto t = call("POST", "/v1/guardrails/alerts/test", token_);
  ASSERT_EQ(t.status, 202) << t.describe();
  auto reqs = hook.wait_for(1, 300ms);
  ASSERT_EQ(reqs.size(), 1u);
  expect_signed(reqs[0]);
  EXPECT_EQ(json::parse(reqs[0].body)["trigger"], "test");

  // No trigger is on: findings are counted by the digest, never alerted.
  post({kBlocked, kBlocked, kDlp, kHoney, kAllowed, Finding{"bob@ci", "integrity", "allow", "integrity"},
        Finding{"bob@ci", "request", "deny", "budget"}, Finding{"carol@dev", "request", "deny", "no-prod-writes"}});
  // Eight days ago: outside the weekly window.
  post({Finding{"old@box", "request", "deny", "stale-rule"}}, unix_now_ms() - 8 * 86'400'000LL);
  auto d = call("POST", "/v1/guardrails/digest/test", token_);
  ASSERT_EQ(d.status, 202) << d.describe();
  reqs = hook.wait_for(2, 300ms);
  ASSERT_EQ(reqs.size(), 2u) << "a finding raised an alert with no trigger on";
  expect_signed(reqs[1]);
  const json digest = json::parse(reqs[1].body);
  EXPECT_EQ(digest["trigger"], "digest");
  const json& f = digest["fields"];
  EXPECT_EQ(f, d.json()["digest"]);
  EXPECT_EQ(f["period"], "weekly");
  EXPECT_EQ(f["total"], 7);
  EXPECT_EQ(f["counts"]["blocked"], 3);
  EXPECT_EQ(f["counts"]["dlp"], 1);
  EXPECT_EQ(f["counts"]["honeytoken"], 1);
  EXPECT_EQ(f["counts"]["integrity"], 1);
  EXPECT_EQ(f["counts"]["budget"], 1);
  EXPECT_EQ(f["counts"]["breaker"], 0);
  EXPECT_EQ(f["top_rules"][0], (json{{"rule", "no-prod-writes"}, {"count", 3}}));
  EXPECT_EQ(f["top_identities"][0], (json{{"identity", "alice@build-7"}, {"count", 3}}));
  EXPECT_EQ(f["top_identities"][1], (json{{"identity", "bob@ci"}, {"count", 3}}));
  EXPECT_EQ(f.dump().find("stale-rule"), std::string::npos) << "an entry outside the window was counted";
  EXPECT_NE(digest["text"].get<std::string>().find("Top rules: no-prod-writes (3)"), std::string::npos)
      << digest["text"];
}

TEST_P(GuardAlertsTest, TheDailyDigestGoesOnceAtItsTime) {
  // Monday 2026-01-05 08:59:50 UTC.
  const int64_t before = 1767603590;
  auto clock = std::make_shared<SteppedClock>(before);
  start(clock);
  fltest::HookReceiver hook;
  put_alerts({{"url", hook.url()},
              {"secret", kSecret},
              {"triggers", json::array()},
              {"digest", "daily"},
              {"digest_at", "09:00"}});
  EXPECT_EQ(call("GET", "/v1/guardrails/alerts", token_).json()["alerts"]["next_digest"], "2026-01-05T09:00:00Z");
  post({kBlocked, kDlp}, (before - 3600) * 1000);
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(hook.requests().empty()) << "a digest before its time";
  clock->set(before + 15);  // 09:00:05
  auto reqs = hook.wait_for(1, 300ms);
  std::this_thread::sleep_for(500ms);  // several checks later: still one
  reqs = hook.requests();
  ASSERT_EQ(reqs.size(), 1u);
  expect_signed(reqs[0]);
  const json digest = json::parse(reqs[0].body);
  EXPECT_EQ(digest["trigger"], "digest");
  EXPECT_EQ(digest["fields"]["period"], "daily");
  EXPECT_EQ(digest["fields"]["until"], "2026-01-05T09:00:05Z");
  EXPECT_EQ(digest["fields"]["counts"]["blocked"], 1);
  EXPECT_EQ(digest["fields"]["counts"]["dlp"], 1);
}

TEST_P(GuardAlertsTest, BadSettingsAreRefusedNamingTheFieldAndNothingIsStored) {
  start();
  const json good{{"url", "http://127.0.0.1:9/alerts"}, {"secret", kSecret}, {"triggers", {"blocked"}}};
  struct Case {
    json body;
    std::string field;
  };
  auto with = [&](const char* k, json v) {
    json b = good;
    b[k] = std::move(v);
    return b;
  };
  json no_secret = good;
  no_secret.erase("secret");
  std::vector<Case> cases = {
      {with("url", "ftp://example.com/"), "url"},
      {no_secret, "secret"},
      {with("secret", "short"), "secret"},
      {with("format", "teams"), "format"},
      {with("triggers", {"blocked", "nope"}), "triggers[1]"},
      {with("triggers", {"dlp", "dlp"}), "triggers[1]"},
      {with("triggers", {7}), "triggers[0]"},
      {with("cooldown_sec", -1), "cooldown_sec"},
      {with("cooldowns", {{"dlp", 5}}), "cooldowns.dlp"},
      {with("cooldowns", {{"blocked", 90000}}), "cooldowns.blocked"},
      {with("cooldowns", {{"bogus", 5}}), "cooldowns.bogus"},
      {with("digest", "hourly"), "digest"},
      {with("digest_at", "9:00"), "digest_at"},
      {with("digest_at", "24:00"), "digest_at"},
      {with("digest_weekday", "monday"), "digest_weekday"},
      {with("colour", "red"), "colour"},
  };
  json weekly_bad = with("digest", "weekly");
  weekly_bad["digest_weekday"] = "Funday";
  cases.push_back({weekly_bad, "digest_weekday"});
  for (const auto& c : cases) {
    auto r = call("PUT", "/v1/guardrails/alerts", token_, c.body.dump());
    EXPECT_EQ(r.status, 400) << c.body.dump();
    EXPECT_EQ(r.json().value("field", ""), c.field) << r.body;
  }
  EXPECT_TRUE(call("GET", "/v1/guardrails/alerts", token_).json()["alerts"].is_null()) << "a refused body was stored";
  EXPECT_EQ(call("PUT", "/v1/guardrails/alerts", guard_, good.dump()).status, 403) << "a guard's token set alerts";
  EXPECT_EQ(call("POST", "/v1/guardrails/digest/test", token_).status, 409);
}

INSTANTIATE_TEST_SUITE_P(Backends, GuardAlertsTest, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

// Two real faultcp processes on one PostgreSQL database: a block reported
// through each within the cooldown raises one alert, not two, and the next
// one sent after it counts the other.
TEST(GuardAlertReplicas, TwoReplicasShareOneCooldown) {
  fltest::TestDatabase db(Backend::Postgres);
  auto start = [&] {
    auto cp = fltest::ChildProcess::spawn({FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database", db.url()});
    auto line = cp.wait_line_starting("faultcp: listening on", 20s);
    if (!line) ADD_FAILURE() << cp.describe();
    const auto at = line ? line->find("127.0.0.1:") : std::string::npos;
    const uint16_t port = at == std::string::npos ? 0 : static_cast<uint16_t>(std::stoul(line->substr(at + 10)));
    return std::pair{std::move(cp), port};
  };
  auto [a, a_port] = start();
  auto [b, b_port] = start();
  ASSERT_NE(a_port, 0);
  ASSERT_NE(b_port, 0);
  fltest::HookReceiver hook;
  const std::string token =
      fltest::cp_request(a_port, "POST", "/v1/auth/signup", "",
                         R"({"email":"r@example.com","password":"correct horse battery","workspace":"r"})")
          .json()
          .value("token", "");
  const std::string enroll =
      fltest::cp_request(a_port, "POST", "/v1/tokens", token, R"({"kind":"enrollment"})").json().value("token", "");
  const std::string guard = fltest::cp_request(a_port, "POST", "/v1/agents/register", enroll, R"({"hostname":"g"})")
                                .json()
                                .value("token", "");
  ASSERT_EQ(fltest::cp_request(
                b_port, "PUT", "/v1/guardrails/alerts", token,
                json{{"url", hook.url()}, {"secret", kSecret}, {"triggers", {"blocked"}}, {"cooldown_sec", 3}}.dump())
                .status,
            200);
  std::string prev;
  auto report = [&](uint16_t port, uint64_t seq) {
    faultline::ActivityEntry e;
    e.seq = seq;
    e.ts = rfc3339_of(unix_now_ms());
    e.identity = "alice@build-7";
    e.kind = "request";
    e.method = "POST";
    e.host = "evil.example.net";
    e.path = "/upload";
    e.verdict = "deny";
    e.rule = "no-exfil";
    e.prev = prev;
    e.hash = faultline::activity_hash(e);
    prev = e.hash;
    auto r = fltest::cp_request(port, "POST", "/v1/guardrails/activity", guard,
                                json{{"entries", {json::parse(faultline::activity_line(e))}}}.dump());
    EXPECT_EQ(r.status, 200) << r.describe();
  };
  report(a_port, 1);
  report(b_port, 2);
  auto reqs = hook.wait_for(1, 300ms);
  std::this_thread::sleep_for(500ms);  // time for a second one, if it were sent
  reqs = hook.requests();
  ASSERT_EQ(reqs.size(), 1u) << "each replica kept its own cooldown";
  std::this_thread::sleep_for(3500ms);
  report(b_port, 3);
  reqs = hook.wait_for(2, 300ms);
  ASSERT_EQ(reqs.size(), 2u);
  expect_signed(reqs[1]);
  EXPECT_EQ(json::parse(reqs[1].body)["fields"]["suppressed"], 1);
}

faultline::ActivityEntry entry(const std::string& kind, const std::string& verdict, const std::string& rule) {
  faultline::ActivityEntry e;
  e.kind = kind;
  e.verdict = verdict;
  e.rule = rule;
  return e;
}

TEST(GuardAlertRules, EachKindOfEntryHasOneTrigger) {
  using faultline::cp::guard_alert_trigger;
  struct Row {
    faultline::ActivityEntry e;
    std::optional<std::string> want;
  };
  const std::vector<Row> rows = {
      {entry("request", "deny", "no-prod"), "blocked"},
      {entry("exec", "deny", "rm-rf"), "blocked"},
      {entry("request", "allow", ""), std::nullopt},
      {entry("request", "approve", "prod-writes"), std::nullopt},
      {entry("llm", "allow", ""), std::nullopt},
      {entry("dlp", "allow", "dlp-redact"), "dlp"},
      {entry("request", "deny", "dlp-block"), "dlp"},
      {entry("response_threat", "allow", "response-guard/injection"), "response_threat"},
      {entry("off-mission-action", "allow", "intent"), "off-mission-action"},
      {entry("unverified-claim", "allow", "unverified-claim"), "unverified-claim"},
      {entry("receipt", "allow", "receipts/verified"), std::nullopt},
      {entry("honeytoken", "deny", "honeytoken/github_token"), "honeytoken"},
      {entry("request", "deny", "honeytoken"), "honeytoken"},
      {entry("integrity", "allow", "integrity"), "integrity"},
      {entry("breaker", "deny", "circuit-breaker"), "breaker"},
      {entry("request", "deny", "circuit-breaker"), "breaker"},
      {entry("request", "deny", "budget"), "budget"},
      {entry("mirror", "allow", "mirror"), std::nullopt},
      {entry("anomaly", "allow", "anomaly"), std::nullopt},
  };
  for (const auto& r : rows)
    EXPECT_EQ(guard_alert_trigger(r.e), r.want) << r.e.kind << " " << r.e.verdict << " " << r.e.rule;
}

TEST(GuardAlertRules, TheDigestIsDueAtTheLastBoundaryNotYetSent) {
  using faultline::cp::guard_digest_due;
  faultline::cp::GuardAlertSettings s;
  s.digest = "daily";
  s.digest_at = "09:00";
  const int64_t monday_9 = 1767603600;  // 2026-01-05T09:00:00Z, a Monday
  s.digest_sent_s = monday_9 - 60;
  EXPECT_EQ(guard_digest_due(s, monday_9 - 1), std::nullopt);
  EXPECT_EQ(guard_digest_due(s, monday_9), monday_9);
  EXPECT_EQ(guard_digest_due(s, monday_9 + 5 * 3600), monday_9);
  s.digest_sent_s = monday_9 + 10;
  EXPECT_EQ(guard_digest_due(s, monday_9 + 23 * 3600), std::nullopt);
  EXPECT_EQ(guard_digest_due(s, monday_9 + 86'400), monday_9 + 86'400);
  s.digest = "weekly";
  s.digest_weekday = "wednesday";
  s.digest_sent_s = 0;
  // Monday: the last Wednesday was 2025-12-31.
  EXPECT_EQ(guard_digest_due(s, monday_9 + 60), monday_9 - 5 * 86'400);
  s.digest_sent_s = monday_9;
  EXPECT_EQ(guard_digest_due(s, monday_9 + 2 * 86'400 - 1), std::nullopt);
  EXPECT_EQ(guard_digest_due(s, monday_9 + 2 * 86'400), monday_9 + 2 * 86'400);
  s.digest = "off";
  EXPECT_EQ(guard_digest_due(s, monday_9 + 30 * 86'400), std::nullopt);
}

TEST(GuardAlertRules, SlackTextIsEscapedAndCut) {
  const json m = faultline::cp::slack_message({{"source", "faultcp"},
                                               {"trigger", "blocked"},
                                               {"title", std::string(300, 'T')},
                                               {"text", "<!channel> & <https://evil.example|click>"},
                                               {"fields", {{"host", "<@U123>"}, {"empty", ""}}},
                                               {"sent_at", "2026-01-05T09:00:00Z"}});
  EXPECT_EQ(m["blocks"][0]["text"]["text"].get<std::string>().size(), 150u);
  EXPECT_EQ(m["blocks"][1]["text"]["text"], "&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;");
  EXPECT_EQ(m["blocks"][2]["fields"].size(), 1u) << "an empty field was shown";
  EXPECT_EQ(m["blocks"][2]["fields"][0]["text"], "*host*\n&lt;@U123&gt;");
  EXPECT_EQ(m["text"].get<std::string>().find('<'), std::string::npos);
  EXPECT_TRUE(faultline::cp::is_slack_webhook_url("https://hooks.slack.com/services/T/B/X"));
  EXPECT_FALSE(faultline::cp::is_slack_webhook_url("https://hooks.slack.com.evil.example/services/T/B/X"));
  EXPECT_FALSE(faultline::cp::is_slack_webhook_url("http://hooks.slack.com/services/T/B/X"));
}

}  // namespace guard_alerts_test
