// The AI-agent guard's held requests, its policy section and its proctor's
// settings: guards post a held request and long-poll its decision (the same
// held-exchange mechanism as the agents' /next), people decide; a new guard
// section version is long-polled the same way.
#include <charconv>
#include <cstdio>

#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/api/rfc3339.h"
#include "userspace/policy/guard_section.h"

namespace faultline::cp {
namespace guardrails_detail {

constexpr std::chrono::milliseconds kMaxGuardWait{60'000};
constexpr int64_t kMaxApprovalLifeMs = 24 * 3600 * 1000;  // a held request is a person's minutes, not days
constexpr size_t kMaxApprovalText = 4096;
constexpr size_t kMaxGuardSectionBytes = 48 * 1024;

const std::vector<FieldRule> kApprovalFields = {
    {"request_id", JsonType::String, true},
    {"identity", JsonType::String, true},
    {"method", JsonType::String},
    {"host", JsonType::String, true},
    {"path", JsonType::String},
    {"rule", JsonType::String},
    {"reason", JsonType::String},
    {"expires_at", JsonType::String, true},
};
const std::vector<FieldRule> kDecisionFields = {{"reason", JsonType::String}};
const std::vector<FieldRule> kProctorReviewFields = {
    {"request_id", JsonType::String, true}, {"identity", JsonType::String, true}, {"decision", JsonType::String, true},
    {"reason", JsonType::String},           {"model", JsonType::String},
};
const std::vector<FieldRule> kProctorFields = {
    {"enabled", JsonType::Boolean, true}, {"model", JsonType::String},       {"url", JsonType::String},
    {"api_key", JsonType::String},        {"timeout_ms", JsonType::Integer},
};

// "30s", "1500ms", "2m" or bare seconds ("30"); none if it is none of those.
std::optional<std::chrono::milliseconds> parse_wait(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0 || n > 9) return std::nullopt;
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + n, v);
  const std::string_view unit = s.substr(n);
  if (unit.empty() || unit == "s") return std::chrono::milliseconds(v * 1000);
  if (unit == "ms") return std::chrono::milliseconds(v);
  if (unit == "m") return std::chrono::milliseconds(v * 60'000);
  return std::nullopt;
}

// ?wait=: zero when absent; a 400 naming it when unreadable or over the cap.
std::variant<std::chrono::milliseconds, HttpReply> wait_param(const HttpRequest& req) {
  auto w = req.query_param("wait");
  if (!w) return std::chrono::milliseconds(0);
  auto d = parse_wait(*w);
  if (!d) return api_error(400, "wait: must be a duration such as 30s or 500ms", "wait");
  if (*d > kMaxGuardWait) return api_error(400, "wait: at most 60s", "wait");
  return *d;
}

// The state a person sees: a pending request past its deadline is expired.
std::string effective_state(const GuardApproval& a, int64_t now_ms) {
  return a.state == "pending" && now_ms >= a.expires_ms ? "expired" : a.state;
}

nlohmann::json approval_json(const GuardApproval& a, int64_t now_ms) {
  const std::string state = effective_state(a, now_ms);
  nlohmann::json j{{"id", a.id},
                   {"request_id", a.request_id},
                   {"identity", a.identity},
                   {"method", a.method},
                   {"host", a.host},
                   {"path", a.path},
                   {"rule", a.rule},
                   {"reason", a.reason},
                   {"created_ms", a.created_ms},
                   {"expires_ms", a.expires_ms},
                   {"expires_at", rfc3339_from_ms(a.expires_ms)},
                   {"posted_by", a.posted_by},
                   {"state", state},
                   {"decided_by", a.decided_by},
                   {"decision_reason", a.decision_reason}};
  // What a guard acts on: forward on "approve", refuse on anything else.
  j["decision"] = state == "approved" ? nlohmann::json("approve")
                  : state == "denied" ? nlohmann::json("deny")
                                      : nlohmann::json(nullptr);
  j["decided_ms"] = a.decided_ms ? nlohmann::json(*a.decided_ms) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json guard_policy_json(const std::optional<GuardPolicyVersion>& v, bool changed) {
  if (!v) return {{"version", 0}, {"policy", nullptr}, {"changed", changed}};
  auto section = nlohmann::json::parse(v->section, nullptr, false);
  return {{"version", v->version},
          {"policy", section.is_discarded() ? nlohmann::json(nullptr) : section},
          {"created_ms", v->created_ms},
          {"created_by", v->created_by},
          {"changed", changed}};
}

}  // namespace guardrails_detail

using namespace guardrails_detail;

HttpReply ControlPlane::post_guard_approval(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kApprovalFields)) return e->reply();
  GuardApproval a;
  for (auto [field, out] : {std::pair<const char*, std::string*>{"request_id", &a.request_id},
                            {"identity", &a.identity},
                            {"method", &a.method},
                            {"host", &a.host},
                            {"path", &a.path},
                            {"rule", &a.rule},
                            {"reason", &a.reason}}) {
    *out = j.value(field, "");
    if (out->size() > kMaxApprovalText) return ApiError{400, field, "is over 4096 characters"}.reply();
  }
  for (auto [field, value] : {std::pair<const char*, const std::string*>{"request_id", &a.request_id},
                              {"identity", &a.identity},
                              {"host", &a.host}})
    if (value->empty()) return ApiError{400, field, "is empty"}.reply();
  auto expires = parse_api_time(j["expires_at"].get<std::string>());
  if (!expires) return ApiError{400, "expires_at", "must be an RFC 3339 time (2025-06-01T12:00:00Z)"}.reply();
  const int64_t now = now_ms();
  if (*expires <= now) return ApiError{400, "expires_at", "is in the past: the guard has denied it already"}.reply();
  if (*expires - now > kMaxApprovalLifeMs) return ApiError{400, "expires_at", "is more than 24 h away"}.reply();
  a.expires_ms = *expires;
  a.created_ms = now;
  a.posted_by = p.actor();

  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto stored = store_.insert_guard_approval(p.workspace_id, a);
  if (!stored) return storage_error(stored.error());
  const auto& [row, created] = *stored;
  if (created) {
    if (auto au = audit(p, "guardrail.approval.request", "approval:" + std::to_string(row.id),
                        {{"request_id", row.request_id},
                         {"identity", row.identity},
                         {"method", row.method},
                         {"host", row.host},
                         {"path", row.path},
                         {"rule", row.rule},
                         {"expires_ms", row.expires_ms}});
        !au)
      return storage_error(au.error());
  }
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  // A retry of the same request_id gets the first one back (200), decided or not.
  return api_json(created ? 201 : 200, approval_json(row, now));
}

HttpReply ControlPlane::list_guard_approvals(const HttpRequest& req, const Principal& p) {
  int64_t limit = 100;
  if (auto l = req.query_param("limit")) {
    PathParams as_path{{"id", *l}};
    auto n = path_id(as_path);
    if (!n || *n < 1 || *n > 1000) return api_error(400, "limit: must be 1-1000", "limit");
    limit = *n;
  }
  const int64_t now = now_ms();
  auto rows = store_.guard_approvals(p.workspace_id, limit, now);
  if (!rows) return storage_error(rows.error());
  nlohmann::json list = nlohmann::json::array();
  int64_t pending = 0;
  for (const auto& a : *rows) {
    list.push_back(approval_json(a, now));
    pending += effective_state(a, now) == "pending" ? 1 : 0;
  }
  return api_json(200, {{"approvals", list}, {"pending", pending}});
}

std::optional<HttpReply> ControlPlane::guard_wait_answer(const GuardWait& w, bool timed_out) {
  if (w.policy) {
    auto latest = store_.guard_policy(w.workspace_id);
    if (!latest) return storage_error(latest.error());
    const bool newer = latest->has_value() && (*latest)->version > w.id;
    if (!newer && !timed_out) return std::nullopt;
    return api_json(200, guard_policy_json(*latest, newer));
  }
  auto a = store_.guard_approval(w.workspace_id, w.id);
  if (!a) return storage_error(a.error());
  if (!a->has_value()) return api_error(404, "no such approval");
  const int64_t now = now_ms();
  if (effective_state(**a, now) == "pending" && !timed_out) return std::nullopt;
  return api_json(200, approval_json(**a, now));
}

HttpReply ControlPlane::guard_approval_decision(const HttpRequest& req, const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such approval");
  auto wait = wait_param(req);
  if (auto* r = std::get_if<HttpReply>(&wait)) return *r;
  auto a = store_.guard_approval(p.workspace_id, *id);
  if (!a) return storage_error(a.error());
  if (!a->has_value()) return api_error(404, "no such approval");
  const GuardWait w{p.workspace_id, false, *id};
  auto d = std::get<std::chrono::milliseconds>(wait);
  auto now = guard_wait_answer(w, d.count() == 0);
  if (now) return *now;
  // Held until a decision, the withdrawal, the request's expiry or the wait's
  // end, whichever comes first: a guard learns of an expiry when it happens.
  const auto until_expiry = std::chrono::milliseconds(std::max<int64_t>((*a)->expires_ms - now_ms(), 0) + 5);
  guard_waits_[req.exchange] = w;
  const uint64_t exchange = req.exchange;
  server_.after(std::min(d, until_expiry), [this, exchange] { end_guard_wait(exchange); });
  return HttpReply::later();
}

void ControlPlane::end_guard_wait(uint64_t exchange) {
  auto it = guard_waits_.find(exchange);
  if (it == guard_waits_.end()) return;  // answered already
  const GuardWait w = it->second;
  guard_waits_.erase(it);
  if (!server_.waiting(exchange)) return;
  server_.complete(exchange, *guard_wait_answer(w, true));
}

void ControlPlane::wake_guard(int64_t ws, bool policy, int64_t id) {
  const std::string payload =
      replica_ + " " + std::to_string(ws) + (policy ? " guard-policy " : " approval ") + std::to_string(id);
  if (auto told = store_.notify(kWakeChannel, payload); !told)
    std::fprintf(stderr, "faultcp: NOTIFY: %s\n", told.error().describe().c_str());
  wake_guard_local(ws, policy, id);
}

void ControlPlane::wake_guard_local(int64_t ws, bool policy, int64_t id) {
  std::vector<std::pair<uint64_t, GuardWait>> mine;
  for (const auto& [exchange, w] : guard_waits_)
    if (w.workspace_id == ws && w.policy == policy && (policy ? w.id < id : w.id == id)) mine.emplace_back(exchange, w);
  for (const auto& [exchange, w] : mine) {
    if (!server_.waiting(exchange)) {
      guard_waits_.erase(exchange);  // the guard hung up
      continue;
    }
    auto answer = guard_wait_answer(w, false);
    if (!answer) continue;
    guard_waits_.erase(exchange);
    server_.complete(exchange, *answer);
  }
}

HttpReply ControlPlane::decide_guard_approval(const HttpRequest& req, const PathParams& params, const Principal& p,
                                              bool approve) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such approval");
  auto body = parse_body(req.body, true);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kDecisionFields)) return e->reply();
  const std::string reason = j.value("reason", "");
  if (reason.size() > kMaxApprovalText) return ApiError{400, "reason", "is over 4096 characters"}.reply();
  const int64_t now = now_ms();
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto settled =
      store_.settle_guard_approval(p.workspace_id, *id, approve ? "approved" : "denied", p.actor(), reason, now);
  if (!settled) return storage_error(settled.error());
  if (!settled->has_value()) {
    auto a = store_.guard_approval(p.workspace_id, *id);
    if (!a) return storage_error(a.error());
    if (!a->has_value()) return api_error(404, "no such approval");
    const std::string state = effective_state(**a, now);
    return api_error(409, "approval " + std::to_string(*id) + " is " + state + ": it can no longer be decided",
                     "state");
  }
  const GuardApproval& a = **settled;
  if (auto au = audit(p, std::string("guardrail.approval.") + (approve ? "approve" : "deny"),
                      "approval:" + std::to_string(a.id),
                      {{"request_id", a.request_id},
                       {"identity", a.identity},
                       {"method", a.method},
                       {"host", a.host},
                       {"path", a.path},
                       {"rule", a.rule},
                       {"reason", reason},
                       {"decided_by", p.actor()}});
      !au)
    return storage_error(au.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  wake_guard(p.workspace_id, false, a.id);
  return api_json(200, approval_json(a, now));
}

HttpReply ControlPlane::withdraw_guard_approval(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such approval");
  const int64_t now = now_ms();
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto settled = store_.settle_guard_approval(p.workspace_id, *id, "withdrawn", p.actor(), "", now);
  if (!settled) return storage_error(settled.error());
  if (!settled->has_value()) {
    auto a = store_.guard_approval(p.workspace_id, *id);
    if (!a) return storage_error(a.error());
    if (!a->has_value()) return api_error(404, "no such approval");
    return api_error(
        409, "approval " + std::to_string(*id) + " is " + effective_state(**a, now) + ": nothing to withdraw", "state");
  }
  if (auto au = audit(p, "guardrail.approval.withdraw", "approval:" + std::to_string(*id),
                      {{"request_id", (*settled)->request_id}, {"identity", (*settled)->identity}});
      !au)
    return storage_error(au.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  wake_guard(p.workspace_id, false, *id);
  return api_json(200, approval_json(**settled, now));
}

// The body is the guard section as the policy file holds it: the bare
// {mode, default_allow, rules} or a whole Policy document (its spec.guard is
// kept). Checked by the policy file's own reader: errors name the field.
HttpReply ControlPlane::put_guard_policy(const HttpRequest& req, const Principal& p) {
  if (req.body.size() > kMaxGuardSectionBytes) return api_error(400, "body: the guard section is over 48 KiB", "body");
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  auto parsed = parse_guard_section(j);
  if (!parsed) {
    // One line per problem, "FIELD.PATH: reason": the first names the field,
    // every one is listed as the policy bundle route lists them.
    const std::string& m = parsed.error().message;
    nlohmann::json errors = nlohmann::json::array();
    for (size_t start = 0; start < m.size();) {
      const size_t nl = std::min(m.find('\n', start), m.size());
      const std::string line = m.substr(start, nl - start);
      const auto colon = line.find(": ");
      errors.push_back({{"field", colon == std::string::npos ? "body" : line.substr(0, colon)},
                        {"reason", colon == std::string::npos ? line : line.substr(colon + 2)}});
      start = nl + 1;
    }
    const std::string field = errors.empty() ? "body" : errors[0]["field"].get<std::string>();
    return api_json(400, {{"error", m}, {"status", 400}, {"field", field}, {"errors", errors}});
  }
  const nlohmann::json section = j.contains("spec") ? j["spec"]["guard"] : j;
  const std::string text = section.dump();
  auto latest = store_.guard_policy(p.workspace_id);
  if (!latest) return storage_error(latest.error());
  if (latest->has_value() && (*latest)->section == text) return api_json(200, guard_policy_json(*latest, false));
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto v = store_.insert_guard_policy(p.workspace_id, text, now_ms(), p.actor());
  if (!v) return storage_error(v.error());
  if (auto au = audit(p, "guardrail.policy.put", "guard-policy:" + std::to_string(v->version),
                      {{"rules", parsed->rules.size()}, {"sha256", sha256_hex(text)}});
      !au)
    return storage_error(au.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  wake_guard(p.workspace_id, true, v->version);
  return api_json(201, guard_policy_json(*v, true));
}

// Without since_version: the newest version (404 if none). With it: answered
// at once if a newer version exists, else held for ?wait= until one is put.
HttpReply ControlPlane::get_guard_policy(const HttpRequest& req, const Principal& p) {
  auto wait = wait_param(req);
  if (auto* r = std::get_if<HttpReply>(&wait)) return *r;
  auto since = req.query_param("since_version");
  if (!since) {
    auto latest = store_.guard_policy(p.workspace_id);
    if (!latest) return storage_error(latest.error());
    if (!latest->has_value()) return api_error(404, "no guard policy: PUT /v1/guardrails/policy sets one");
    return api_json(200, guard_policy_json(*latest, true));
  }
  PathParams as_path{{"id", *since}};
  auto version = path_id(as_path);
  if (!version) return api_error(400, "since_version: must be a version number (0: none yet)", "since_version");
  const GuardWait w{p.workspace_id, true, *version};
  const auto d = std::get<std::chrono::milliseconds>(wait);
  if (auto now = guard_wait_answer(w, d.count() == 0)) return *now;
  guard_waits_[req.exchange] = w;
  const uint64_t exchange = req.exchange;
  server_.after(d, [this, exchange] { end_guard_wait(exchange); });
  return HttpReply::later();
}

HttpReply ControlPlane::put_guard_proctor(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kProctorFields)) return e->reply();
  auto old = store_.guard_proctor(p.workspace_id);
  if (!old) return storage_error(old.error());
  GuardProctor c = old->value_or(GuardProctor{});
  c.enabled = j["enabled"].get<bool>();
  if (j.contains("model")) c.model = j["model"].get<std::string>();
  if (j.contains("url")) c.url = j["url"].get<std::string>();
  // The key is write-only: absent keeps the stored one, "" clears it.
  if (j.contains("api_key")) c.api_key = j["api_key"].get<std::string>();
  if (j.contains("timeout_ms")) c.timeout_ms = j["timeout_ms"].get<int64_t>();
  if (c.model.size() > 256) return ApiError{400, "model", "is over 256 characters"}.reply();
  if (c.url.size() > 2048) return ApiError{400, "url", "is over 2048 characters"}.reply();
  if (c.api_key.size() > 4096) return ApiError{400, "api_key", "is over 4096 characters"}.reply();
  if (!c.url.empty() && c.url.rfind("https://", 0) != 0 && c.url.rfind("http://", 0) != 0)
    return ApiError{400, "url", "must be an http:// or https:// URL"}.reply();
  if (c.timeout_ms < 100 || c.timeout_ms > 120'000) return ApiError{400, "timeout_ms", "must be 100-120000"}.reply();
  if (c.enabled && c.model.empty()) return ApiError{400, "model", "is required when enabled"}.reply();
  if (c.enabled && c.url.empty()) return ApiError{400, "url", "is required when enabled"}.reply();
  c.updated_ms = now_ms();
  c.updated_by = p.actor();
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  if (auto put = store_.put_guard_proctor(p.workspace_id, c); !put) return storage_error(put.error());
  if (auto au = audit(p, "guardrail.proctor.put", "proctor",
                      {{"enabled", c.enabled},
                       {"model", c.model},
                       {"url", c.url},
                       {"timeout_ms", c.timeout_ms},
                       {"api_key_set", !c.api_key.empty()}});
      !au)
    return storage_error(au.error());
  if (auto co = tx.commit(); !co) return storage_error(co.error());
  return get_guard_proctor(p);
}

// A guard's proctor reviewed a held request: its decision, audited.
HttpReply ControlPlane::post_proctor_review(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kProctorReviewFields)) return e->reply();
  const std::string decision = j["decision"].get<std::string>();
  if (decision != "approve" && decision != "deny" && decision != "escalate")
    return ApiError{400, "decision", "'" + decision.substr(0, 40) + "': expected approve, deny or escalate"}.reply();
  for (const char* field : {"request_id", "identity", "reason", "model"})
    if (j.value(field, "").size() > kMaxApprovalText) return ApiError{400, field, "is over 4096 characters"}.reply();
  if (j["request_id"].get<std::string>().empty()) return ApiError{400, "request_id", "is empty"}.reply();
  if (auto au =
          audit(p, "guardrail.proctor." + decision, "request:" + j["request_id"].get<std::string>(),
                {{"identity", j["identity"]}, {"reason", j.value("reason", "")}, {"model", j.value("model", "")}});
      !au)
    return storage_error(au.error());
  return api_json(201, {{"recorded", true}});
}

HttpReply ControlPlane::get_guard_proctor(const Principal& p) {
  auto c = store_.guard_proctor(p.workspace_id);
  if (!c) return storage_error(c.error());
  const GuardProctor v = c->value_or(GuardProctor{});
  return api_json(200, {{"enabled", v.enabled},
                        {"model", v.model},
                        {"url", v.url},
                        {"timeout_ms", v.timeout_ms},
                        {"api_key_set", !v.api_key.empty()},
                        {"updated_ms", v.updated_ms},
                        {"updated_by", v.updated_by}});
}

}  // namespace faultline::cp
