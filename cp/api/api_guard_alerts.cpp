// The guard's alerts: a workspace's settings (GET|PUT /v1/guardrails/alerts),
// the alert each new finding of the activity log raises (one trigger per
// entry, a cooldown per trigger counted in the database so every replica
// shares it), the daily or weekly digest on its schedule, and the two test
// routes. Deliveries go through the webhooks' sender: the same signature,
// retries and outcomes in the audit log.
#include <algorithm>
#include <array>
#include <ctime>

#include "base/redact.h"
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/webhooks/slack_message.h"

namespace faultline::cp {
namespace guard_alerts_detail {

struct TriggerInfo {
  const char* name;
  const char* title;
};
// The order the docs and the digest list them in.
constexpr std::array<TriggerInfo, 9> kAlertTriggers = {{
    {"blocked", "Guard blocked a request"},
    {"dlp", "DLP finding"},
    {"response_threat", "Threat in an LLM answer"},
    {"off-mission-action", "Off-mission action"},
    {"unverified-claim", "Unverified completion claim"},
    {"honeytoken", "Honeytoken used"},
    {"integrity", "Watched file changed"},
    {"breaker", "Circuit breaker"},
    {"budget", "LLM budget refused a call"},
}};
const char* const kTriggerList =
    "blocked, dlp, response_threat, off-mission-action, unverified-claim, honeytoken, integrity, breaker or budget";
const char* const kWeekdays[] = {"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"};

constexpr int64_t kMaxAlertCooldownSec = 86'400;
constexpr int64_t kDefaultCooldownSec = 300;
constexpr size_t kTopN = 5;
constexpr size_t kMaxPathShown = 200;

const std::vector<FieldRule> kGuardAlertFields = {
    {"url", JsonType::String, true},     {"secret", JsonType::String},        {"format", JsonType::String},
    {"triggers", JsonType::Array, true}, {"cooldown_sec", JsonType::Integer}, {"cooldowns", JsonType::Object},
    {"digest", JsonType::String},        {"digest_at", JsonType::String},     {"digest_weekday", JsonType::String},
};

bool known_trigger(const std::string& t) {
  return std::any_of(kAlertTriggers.begin(), kAlertTriggers.end(), [&](const TriggerInfo& i) { return t == i.name; });
}

std::string trigger_title(const std::string& t) {
  for (const auto& i : kAlertTriggers)
    if (t == i.name) return i.title;
  return t;
}

// "HH:MM" (UTC) as minutes of the day, or none.
std::optional<int> minutes_of(const std::string& at) {
  if (at.size() != 5 || at[2] != ':' || !isdigit(at[0]) || !isdigit(at[1]) || !isdigit(at[3]) || !isdigit(at[4]))
    return std::nullopt;
  const int h = (at[0] - '0') * 10 + (at[1] - '0'), m = (at[3] - '0') * 10 + (at[4] - '0');
  if (h > 23 || m > 59) return std::nullopt;
  return h * 60 + m;
}

int weekday_index(const std::string& day) {
  for (int i = 0; i < 7; ++i)
    if (day == kWeekdays[i]) return i;
  return -1;
}

// What a receiver may see of a path: no query string (the guard masks what
// it finds there, and an alert need not carry the rest), the default
// redaction rules over what is left, at most 200 characters.
std::string shown_path(const std::string& path) {
  const size_t q = path.find('?');
  std::string out = Redactor{}.text(path.substr(0, q));
  if (out.size() > kMaxPathShown) {
    size_t end = kMaxPathShown;
    while (end > 0 && (static_cast<unsigned char>(out[end]) & 0xC0) == 0x80) --end;  // not inside a character
    out = out.substr(0, end) + "...";
  }
  if (q != std::string::npos) out += "?...";
  return out;
}

// The part of a rule after its family ("honeytoken/aws_access_key" ->
// "aws_access_key"): the finding's type, never its value.
std::string finding_hint(const std::string& rule) {
  const size_t slash = rule.find('/');
  return slash == std::string::npos ? "" : rule.substr(slash + 1);
}

std::string rfc3339_of_s(int64_t s) {
  const std::time_t t = static_cast<std::time_t>(s);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace guard_alerts_detail

using namespace guard_alerts_detail;

// One trigger per entry, the most specific first: a honeytoken or the breaker
// also denies the request, but is alerted as itself, not as a plain block.
std::optional<std::string> guard_alert_trigger(const ActivityEntry& e) {
  if (e.kind == "honeytoken" || e.rule.starts_with("honeytoken")) return "honeytoken";
  if (e.kind == "breaker" || e.rule == "circuit-breaker") return "breaker";
  if (e.kind == "integrity") return "integrity";
  if (e.kind == "response_threat") return "response_threat";
  if (e.kind == "unverified-claim") return "unverified-claim";
  if (e.kind == "off-mission-action") return "off-mission-action";
  if (e.kind == "dlp" || e.rule == "dlp-block") return "dlp";
  if (e.rule == "budget" && e.verdict == "deny") return "budget";
  if (e.verdict == "deny") return "blocked";
  return std::nullopt;
}

std::optional<int64_t> guard_digest_due(const GuardAlertSettings& s, int64_t now_s) {
  if (s.digest == "off") return std::nullopt;
  const auto at = minutes_of(s.digest_at);
  if (!at) return std::nullopt;
  const int64_t day_start = now_s - now_s % 86'400;
  int64_t boundary = day_start + *at * 60;
  if (boundary > now_s) boundary -= 86'400;
  if (s.digest == "weekly") {
    const int want = weekday_index(s.digest_weekday);
    if (want < 0) return std::nullopt;
    // 1970-01-01 was a Thursday (4).
    const int have = static_cast<int>((boundary / 86'400 + 4) % 7);
    boundary -= ((have - want + 7) % 7) * int64_t{86'400};
  }
  if (boundary <= s.digest_sent_s) return std::nullopt;
  return boundary;
}

HttpReply ControlPlane::put_guard_alerts(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kGuardAlertFields)) return e->reply();
  auto old = store_.guard_alerts(p.workspace_id);
  if (!old) return storage_error(old.error());
  GuardAlertSettings s;
  s.url = j["url"].get<std::string>();
  if (auto url = parse_webhook_url(s.url); !url) return ApiError{400, "url", url.error().message}.reply();
  s.format = j.value("format", "auto");
  if (s.format != "auto" && s.format != "faultline" && s.format != "slack")
    return ApiError{400, "format", "must be auto, faultline or slack"}.reply();
  const bool slack = s.format == "slack" || (s.format == "auto" && is_slack_webhook_url(s.url));
  // Write-only: absent keeps the stored secret.
  s.secret = j.contains("secret") ? j["secret"].get<std::string>() : (*old ? (*old)->secret : "");
  if ((j.contains("secret") || !slack) && (s.secret.size() < 16 || s.secret.size() > 256))
    return ApiError{400, "secret",
                    s.secret.empty() ? "is required (16-256 characters): the alerts are signed with it"
                                     : "must be 16-256 characters"}
        .reply();
  const auto& triggers = j["triggers"];
  for (size_t i = 0; i < triggers.size(); ++i) {
    const std::string field = "triggers[" + std::to_string(i) + "]";
    if (!triggers[i].is_string()) return ApiError{400, field, "must be a string"}.reply();
    const auto t = triggers[i].get<std::string>();
    if (!known_trigger(t)) return ApiError{400, field, "'" + t.substr(0, 40) + "' must be " + kTriggerList}.reply();
    if (std::find(s.triggers.begin(), s.triggers.end(), t) != s.triggers.end())
      return ApiError{400, field, "is listed twice"}.reply();
    s.triggers.push_back(t);
  }
  const int64_t every = j.value("cooldown_sec", kDefaultCooldownSec);
  if (every < 0 || every > kMaxAlertCooldownSec) return ApiError{400, "cooldown_sec", "must be within 0-86400"}.reply();
  for (const auto& t : s.triggers) s.cooldowns[t] = every;
  if (j.contains("cooldowns"))
    for (const auto& [name, sec] : j["cooldowns"].items()) {
      const std::string field = "cooldowns." + name.substr(0, 40);
      if (!known_trigger(name)) return ApiError{400, field, std::string("is not a trigger: ") + kTriggerList}.reply();
      if (!s.cooldowns.contains(name)) return ApiError{400, field, "is not one of the triggers listed"}.reply();
      if (!sec.is_number_integer() || sec.get<int64_t>() < 0 || sec.get<int64_t>() > kMaxAlertCooldownSec)
        return ApiError{400, field, "must be seconds within 0-86400"}.reply();
      s.cooldowns[name] = sec.get<int64_t>();
    }
  s.digest = j.value("digest", "off");
  if (s.digest != "off" && s.digest != "daily" && s.digest != "weekly")
    return ApiError{400, "digest", "must be daily, weekly or off"}.reply();
  s.digest_at = j.value("digest_at", "09:00");
  if (!minutes_of(s.digest_at)) return ApiError{400, "digest_at", "must be HH:MM (UTC, 00:00-23:59)"}.reply();
  s.digest_weekday = j.value("digest_weekday", "monday");
  if (weekday_index(s.digest_weekday) < 0)
    return ApiError{400, "digest_weekday", "must be a day's name in lower case (monday ... sunday)"}.reply();
  if (j.contains("digest_weekday") && s.digest != "weekly")
    return ApiError{400, "digest_weekday", "is for a weekly digest only"}.reply();
  // A new schedule starts now: the first digest is the next one due, not
  // one for a time that passed before it was set.
  const bool same_schedule = *old && (*old)->digest == s.digest && (*old)->digest_at == s.digest_at &&
                             (*old)->digest_weekday == s.digest_weekday;
  s.digest_sent_s = same_schedule ? (*old)->digest_sent_s : digest_clock().now_unix_s();
  s.updated_ms = now_ms();
  s.updated_by = p.actor();
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  if (auto put = store_.put_guard_alerts(p.workspace_id, s); !put) return storage_error(put.error());
  if (auto au = audit(p, "guardrail.alerts.put", "alerts",
                      {{"url", s.url},
                       {"format", s.format},
                       {"triggers", s.triggers},
                       {"cooldowns", s.cooldowns},
                       {"digest", s.digest},
                       {"digest_at", s.digest_at},
                       {"secret_set", !s.secret.empty()}});
      !au)
    return storage_error(au.error());
  if (auto co = tx.commit(); !co) return storage_error(co.error());
  return api_json(200, {{"alerts", guard_alerts_json(s)}});
}

HttpReply ControlPlane::get_guard_alerts(const Principal& p) {
  auto s = store_.guard_alerts(p.workspace_id);
  if (!s) return storage_error(s.error());
  return api_json(200, {{"alerts", s->has_value() ? guard_alerts_json(**s) : nlohmann::json(nullptr)}});
}

// The secret is never shown again: only whether it is set.
nlohmann::json ControlPlane::guard_alerts_json(const GuardAlertSettings& s) {
  nlohmann::json next = nullptr;
  if (s.digest != "off") {
    // The next digest: the first boundary after the last one passed.
    GuardAlertSettings ahead = s;
    ahead.digest_sent_s = 0;
    const int64_t now = digest_clock().now_unix_s();
    if (auto last = guard_digest_due(ahead, now)) next = rfc3339_of_s(*last + (s.digest == "weekly" ? 7 : 1) * 86'400);
  }
  return {
      {"url", s.url},
      {"format", s.format},
      {"sends_as", s.format == "slack" || (s.format == "auto" && is_slack_webhook_url(s.url)) ? "slack" : "faultline"},
      {"secret_set", !s.secret.empty()},
      {"triggers", s.triggers},
      {"cooldowns", s.cooldowns},
      {"digest", s.digest},
      {"digest_at", s.digest_at},
      {"digest_weekday", s.digest_weekday},
      {"next_digest", next},
      {"updated_ms", s.updated_ms},
      {"updated_by", s.updated_by}};
}

const Clock& ControlPlane::digest_clock() const {
  static const SystemClock host;
  return config_.digest_clock ? *config_.digest_clock : host;
}

bool ControlPlane::send_guard_alert(int64_t ws, const GuardAlertSettings& s, const std::string& trigger,
                                    nlohmann::json envelope) {
  if (!webhooks_) return false;
  auto url = parse_webhook_url(s.url);
  if (!url) return false;
  WebhookDelivery d;
  d.id = ++next_delivery_;
  d.workspace_id = ws;
  d.trigger = trigger;
  d.url = *url;
  d.url_text = s.url;
  d.secret = s.secret;
  d.format = s.format == "slack" || (s.format == "auto" && is_slack_webhook_url(s.url)) ? WebhookFormat::Slack
                                                                                        : WebhookFormat::Envelope;
  envelope["source"] = "faultcp";
  envelope["trigger"] = trigger;
  d.envelope = std::move(envelope);
  const uint64_t id = d.id;
  if (!webhooks_->send(std::move(d))) {
    (void)audit_as(ws, "faultcp", "webhook.dropped", "webhook:" + trigger, {{"reason", "the send queue is full"}});
    return false;
  }
  last_guard_delivery_ = id;
  return true;
}

// Called after the batch's transaction committed: the entries are stored
// whatever happens here. The cooldowns are read and written in a transaction
// of their own under the workspace's lock (two replicas taking two batches
// count into the same row); the deliveries are queued after it commits.
void ControlPlane::raise_guard_alerts(int64_t ws, const std::vector<GuardActivityRow>& rows) {
  if (rows.empty()) return;
  auto settings = store_.guard_alerts(ws);
  if (!settings || !settings->has_value() || (*settings)->triggers.empty()) return;
  const GuardAlertSettings& s = **settings;
  struct Ready {
    std::string trigger;
    nlohmann::json envelope;
  };
  std::vector<Ready> ready;
  const int64_t now = now_ms();
  SqlTransaction tx(store_.sql());
  auto fail = [&](const Error& e) {
    std::fprintf(stderr, "faultcp: guard alerts of workspace %lld: %s\n", static_cast<long long>(ws),
                 e.describe().c_str());
  };
  if (auto begun = store_.begin(tx, ws); !begun) return fail(begun.error());
  for (const auto& row : rows) {
    const ActivityEntry& e = row.entry;
    auto trigger = guard_alert_trigger(e);
    if (!trigger || std::find(s.triggers.begin(), s.triggers.end(), *trigger) == s.triggers.end()) continue;
    const auto cooldown = s.cooldowns.contains(*trigger) ? s.cooldowns.at(*trigger) : kDefaultCooldownSec;
    auto gate = store_.pass_guard_alert(ws, *trigger, now, cooldown * 1000);
    if (!gate) return fail(gate.error());
    if (!gate->send) continue;
    const std::string path = shown_path(e.path);
    const std::string hint = finding_hint(e.rule);
    std::string text = e.identity + ": " + (e.method.empty() ? "" : e.method + " ") + e.host + path + " -> " +
                       e.verdict + (e.rule.empty() ? "" : " (rule " + e.rule + ")") +
                       (e.reason.empty() ? "" : ": " + e.reason);
    if (gate->suppressed > 0)
      text += "; " + std::to_string(gate->suppressed) + " more " + *trigger + " alert" +
              (gate->suppressed == 1 ? " was" : "s were") + " held back by the cooldown since the last one sent";
    ready.push_back({*trigger,
                     {{"title", trigger_title(*trigger) + ": " + e.identity},
                      {"text", text},
                      {"fields",
                       {{"identity", e.identity},
                        {"kind", e.kind},
                        {"rule", e.rule},
                        {"finding", hint},
                        {"verdict", e.verdict},
                        {"method", e.method},
                        {"host", e.host},
                        {"path", path},
                        {"seq", e.seq},
                        {"ts", e.ts},
                        {"entry_hash", e.hash},
                        {"suppressed", gate->suppressed},
                        {"cooldown_sec", cooldown}}}}});
    if (!e.reason.empty()) ready.back().envelope["fields"]["reason"] = e.reason;
  }
  if (auto co = tx.commit(); !co) return fail(co.error());
  for (auto& r : ready) (void)send_guard_alert(ws, s, r.trigger, std::move(r.envelope));
}

HttpReply ControlPlane::test_guard_alert(const Principal& p) {
  auto s = store_.guard_alerts(p.workspace_id);
  if (!s) return storage_error(s.error());
  if (!s->has_value()) return api_error(409, "alerts: not configured: PUT /v1/guardrails/alerts first", "alerts");
  if (!send_guard_alert(
          p.workspace_id, **s, "test",
          {{"title", "Test alert from faultcp"},
           {"text", "The guard's alerts of this workspace reach this receiver (sent by " + p.actor() + ")."},
           {"fields", {{"triggers", (*s)->triggers}, {"by", p.actor()}}}}))
    return api_error(503, "the alert could not be queued (the send queue is full)");
  (void)audit(p, "guardrail.alerts.test", "alerts", {{"delivery", last_guard_delivery_}});
  return api_json(202, {{"queued", true}, {"delivery", last_guard_delivery_}});
}

nlohmann::json ControlPlane::guard_digest(const std::string& period, int64_t until_s,
                                          const std::vector<GuardFindingCount>& counts) {
  const int64_t since_s = until_s - (period == "weekly" ? 7 : 1) * 86'400;
  std::map<std::string, int64_t> by_trigger, by_rule, by_identity;
  int64_t total = 0;
  for (const auto& c : counts) {
    ActivityEntry e;
    e.kind = c.kind;
    e.rule = c.rule;
    e.verdict = c.verdict;
    auto trigger = guard_alert_trigger(e);
    if (!trigger) continue;
    by_trigger[*trigger] += c.count;
    by_rule[c.rule.empty() ? "(the default)" : c.rule] += c.count;
    by_identity[c.identity] += c.count;
    total += c.count;
  }
  auto top = [](const std::map<std::string, int64_t>& m, const char* key) {
    std::vector<std::pair<std::string, int64_t>> v(m.begin(), m.end());
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < v.size() && i < kTopN; ++i) out.push_back({{key, v[i].first}, {"count", v[i].second}});
    return out;
  };
  nlohmann::json per_trigger = nlohmann::json::object();
  std::string counts_text;
  for (const auto& t : kAlertTriggers) {
    const int64_t n = by_trigger.contains(t.name) ? by_trigger[t.name] : 0;
    per_trigger[t.name] = n;
    if (n > 0) counts_text += std::string(counts_text.empty() ? "" : ", ") + t.name + " " + std::to_string(n);
  }
  const auto rules = top(by_rule, "rule"), identities = top(by_identity, "identity");
  auto listed = [](const nlohmann::json& list, const char* key) {
    std::string out;
    for (const auto& r : list)
      out += (out.empty() ? "" : ", ") + r[key].get<std::string>() + " (" + std::to_string(r["count"].get<int64_t>()) +
             ")";
    return out.empty() ? std::string("none") : out;
  };
  std::string text = std::to_string(total) + " finding" + (total == 1 ? "" : "s") + " from " + rfc3339_of_s(since_s) +
                     " to " + rfc3339_of_s(until_s) + (counts_text.empty() ? "." : ": " + counts_text + ".");
  if (total > 0)
    text += "\nTop rules: " + listed(rules, "rule") + ".\nTop identities: " + listed(identities, "identity") + ".";
  return {{"title", std::string("Guard digest (") + period + "): " + std::to_string(total) + " finding" +
                        (total == 1 ? "" : "s")},
          {"text", text},
          {"fields",
           {{"period", period},
            {"since", rfc3339_of_s(since_s)},
            {"until", rfc3339_of_s(until_s)},
            {"total", total},
            {"counts", per_trigger},
            {"top_rules", rules},
            {"top_identities", identities}}}};
}

HttpReply ControlPlane::test_guard_digest(const Principal& p) {
  auto s = store_.guard_alerts(p.workspace_id);
  if (!s) return storage_error(s.error());
  if (!s->has_value()) return api_error(409, "alerts: not configured: PUT /v1/guardrails/alerts first", "alerts");
  const std::string period = (*s)->digest == "weekly" ? "weekly" : "daily";
  const int64_t until = digest_clock().now_unix_s();
  const int64_t since = until - (period == "weekly" ? 7 : 1) * 86'400;
  auto counts = store_.guard_finding_counts(p.workspace_id, since * 1000, (until + 1) * 1000);
  if (!counts) return storage_error(counts.error());
  auto envelope = guard_digest(period, until, *counts);
  const nlohmann::json fields = envelope["fields"];
  if (!send_guard_alert(p.workspace_id, **s, "digest", std::move(envelope)))
    return api_error(503, "the digest could not be queued (the send queue is full)");
  (void)audit(p, "guardrail.digest.test", "alerts", {{"delivery", last_guard_delivery_}});
  return api_json(202, {{"queued", true}, {"delivery", last_guard_delivery_}, {"digest", fields}});
}

// Every digest_check: each workspace whose digest is due claims it (one
// replica wins the claim) and sends the period that ends now. A digest
// missed while no faultcp ran is sent once when one runs again.
void ControlPlane::send_due_digests() {
  const int64_t now = digest_clock().now_unix_s();
  auto all = store_.guard_digests();
  if (!all) std::fprintf(stderr, "faultcp: digests: %s\n", all.error().describe().c_str());
  for (const auto& [ws, s] : all.value_or({})) {
    if (!guard_digest_due(s, now)) continue;
    auto claimed = store_.claim_guard_digest(ws, s.digest_sent_s, now);
    if (!claimed || !*claimed) continue;
    const int64_t since = now - (s.digest == "weekly" ? 7 : 1) * 86'400;
    auto counts = store_.guard_finding_counts(ws, since * 1000, (now + 1) * 1000);
    if (!counts) {
      std::fprintf(stderr, "faultcp: digest of workspace %lld: %s\n", static_cast<long long>(ws),
                   counts.error().describe().c_str());
      continue;
    }
    (void)send_guard_alert(ws, s, "digest", guard_digest(s.digest, now, *counts));
  }
  server_.after(config_.digest_check, [this] { send_due_digests(); });
}

}  // namespace faultline::cp
