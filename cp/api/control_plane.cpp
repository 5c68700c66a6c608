// The route table, the auth layer, the activity log hook, /healthz and /metrics.
#include "cp/api/control_plane.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "base/json_quote.h"
#include "cp/api/api_error.h"
#include "cp/storage/migrations.h"

namespace faultline::cp {

using TK = TokenKind;

std::string Principal::actor() const {
  if (agent_id) return "agent:" + std::to_string(*agent_id);
  if (user_id && kind == TokenKind::Session) return "user:" + std::to_string(*user_id);
  return "token:" + std::to_string(token_id);
}

std::optional<int64_t> path_id(const PathParams& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end() || it->second.empty() || it->second.size() > 18 ||
      it->second.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(it->second);
}

ControlPlane::ControlPlane(Store& store, HttpServer& server, ControlPlaneConfig config)
    : store_(store),
      server_(server),
      config_(config),
      login_by_address_(config.login_per_address),
      login_failures_by_account_(config.login_per_account) {
  server_.set_log([this](const HttpExchange& x) { ++responses_by_code_[x.status]; });

  add_open_route("GET", "/healthz", [this](const HttpRequest&, const PathParams&) { return healthz(); });
  add_open_route("POST", "/v1/auth/signup", [this](const HttpRequest& r, const PathParams&) { return signup(r); });
  add_open_route("POST", "/v1/auth/login", [this](const HttpRequest& r, const PathParams&) { return login(r); });

  add_route("GET", "/metrics", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return metrics(p); });
  add_route("POST", "/v1/tokens", {TK::Session},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return create_token(r, p); });
  add_route("GET", "/v1/tokens", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return list_tokens(p); });
  add_route("DELETE", "/v1/tokens/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return revoke_token(a, p); });

  add_route("POST", "/v1/agents/register", {TK::Enrollment},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return register_agent(r, p); });
  add_route("GET", "/v1/agents", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return list_agents(p); });
  add_route("GET", "/v1/agents/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return get_agent(a, p); });
  add_route("GET", "/v1/agents/{id}/next", {TK::Agent},
            [this](const HttpRequest& r, const PathParams& a, const Principal& p) { return next_for_agent(r, a, p); });
  add_route("POST", "/v1/agents/{id}/events", {TK::Agent},
            [this](const HttpRequest& r, const PathParams& a, const Principal& p) { return agent_event(r, a, p); });

  add_route("POST", "/v1/experiments", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return create_experiment(r, p); });
  add_route("GET", "/v1/experiments", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return list_experiments(r, p); });
  add_route("GET", "/v1/experiments/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return get_experiment(a, p); });
  add_route("POST", "/v1/experiments/{id}/abort", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return abort_experiment(a, p); });

  add_route("POST", "/v1/chaos-mesh", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return apply_chaos_mesh(r, p); });

  add_route("POST", "/v1/services", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return create_service(r, p); });
  add_route("GET", "/v1/services", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return list_services(p); });
  add_route("GET", "/v1/services/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return get_service(a, p); });
  add_route("DELETE", "/v1/services/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return delete_service(a, p); });
  add_route("GET", "/v1/services/{id}/profile", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return service_profile(a, p); });
  add_route("GET", "/v1/services/{id}/slo", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return service_slo(a, p); });
  add_route("POST", "/v1/validate", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return validate_proposal(r, p); });
  add_route("POST", "/v1/proposals/run", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return run_proposer(r, p); });
  add_route("GET", "/v1/proposals", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return list_proposals(r, p); });
  add_route("GET", "/v1/proposals/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return get_proposal(a, p); });
  // A person decides: a session token only (no API token, no agent).
  add_route(
      "POST", "/v1/proposals/{id}/approve", {TK::Session},
      [this](const HttpRequest& r, const PathParams& a, const Principal& p) { return decide_proposal(r, a, p, true); });
  add_route("POST", "/v1/proposals/{id}/reject", {TK::Session},
            [this](const HttpRequest& r, const PathParams& a, const Principal& p) {
              return decide_proposal(r, a, p, false);
            });
  add_route("POST", "/v1/scenarios", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return create_scenario(r, p); });
  add_route("GET", "/v1/scenarios", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return list_scenarios(p); });
  add_route("GET", "/v1/scenarios/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return get_scenario(a, p); });
  add_route("POST", "/v1/scenarios/{id}/run", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams& a, const Principal& p) { return run_scenario(r, a, p); });
  add_route("POST", "/v1/schedules", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return create_schedule(r, p); });
  add_route("GET", "/v1/schedules", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return list_schedules(p); });
  add_route("GET", "/v1/schedules/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return get_schedule(a, p); });
  add_route("PATCH", "/v1/schedules/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams& a, const Principal& p) { return patch_schedule(r, a, p); });
  add_route("DELETE", "/v1/schedules/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return delete_schedule(a, p); });
  add_route(
      "GET", "/v1/schedules/{id}/firings", {TK::Session, TK::Api},
      [this](const HttpRequest&, const PathParams& a, const Principal& p) { return list_schedule_firings(a, p); });
  add_route("GET", "/v1/scenario-runs", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return list_scenario_runs(p); });
  add_route("GET", "/v1/scenario-runs/{id}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return get_scenario_run(a, p); });
  add_route("POST", "/v1/scenario-runs/{id}/abort", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal& p) { return abort_scenario_run(a, p); });
  add_route("GET", "/v1/catalogue", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal&) { return list_catalogue(); });
  add_route("GET", "/v1/catalogue/{name}", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams& a, const Principal&) { return get_template(a); });
  add_route(
      "POST", "/v1/catalogue/{name}/render", {TK::Session, TK::Api},
      [this](const HttpRequest& r, const PathParams& a, const Principal&) { return render_catalogue_template(r, a); });

  add_route("POST", "/v1/kill", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return engage_kill(r, p); });
  add_route("DELETE", "/v1/kill", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return release_kill(r, p); });
  add_route("GET", "/v1/kill", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return kill_status(r, p); });

  add_route("GET", "/v1/audit/export", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return audit_export(p); });
  add_route("POST", "/v1/audit/verify", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return audit_verify(r, p); });
  add_route("GET", "/v1/audit.csv", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return audit_csv(p); });

  add_route("GET", "/v1/policy", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return get_policy(r, p, false); });
  add_route("PUT", "/v1/policy", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return put_policy(r, p); });
  add_route("GET", "/v1/policy/export", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return get_policy(r, p, true); });
  add_route("POST", "/v1/policy/apply", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return apply_policy_route(r, p); });
  add_route(
      "POST", "/v1/agents/{id}/policy", {TK::Agent},
      [this](const HttpRequest& r, const PathParams& a, const Principal& p) { return agent_policy_report(r, a, p); });

  // The AI-agent guard. Guards (an agent token, or a person's session when
  // run by hand) post activity and held requests and long-poll decisions and
  // their section; people (session and API tokens) read and decide. An agent
  // token never decides, so a guard cannot approve its own held requests.
  const std::initializer_list<TK> guard_side = {TK::Agent, TK::Session};
  const std::initializer_list<TK> people = {TK::Session, TK::Api};
  add_route("POST", "/v1/guardrails/approvals", guard_side,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return post_guard_approval(r, p); });
  add_route("GET", "/v1/guardrails/approvals", people,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return list_guard_approvals(r, p); });
  add_route("GET", "/v1/guardrails/approvals/{id}/decision", guard_side,
            [this](const HttpRequest& r, const PathParams& a, const Principal& p) {
              return guard_approval_decision(r, a, p);
            });
  add_route("POST", "/v1/guardrails/approvals/{id}/approve", people,
            [this](const HttpRequest& r, const PathParams& a, const Principal& p) {
              return decide_guard_approval(r, a, p, true);
            });
  add_route("POST", "/v1/guardrails/approvals/{id}/deny", people,
            [this](const HttpRequest& r, const PathParams& a, const Principal& p) {
              return decide_guard_approval(r, a, p, false);
            });
  add_route(
      "DELETE", "/v1/guardrails/approvals/{id}", guard_side,
      [this](const HttpRequest&, const PathParams& a, const Principal& p) { return withdraw_guard_approval(a, p); });
  add_route("POST", "/v1/guardrails/activity", guard_side,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return post_guard_activity(r, p); });
  add_route("GET", "/v1/guardrails/activity", people,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return list_guard_activity(r, p); });
  add_route(
      "GET", "/v1/guardrails/activity/summary", people,
      [this](const HttpRequest& r, const PathParams&, const Principal& p) { return guard_activity_summary(r, p); });
  add_route("GET", "/v1/guardrails/usage", people,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return guard_usage(r, p); });
  add_route("GET", "/v1/guardrails/mcp-servers", people,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return mcp_servers(r, p); });
  add_route("PUT", "/v1/guardrails/policy", people,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return put_guard_policy(r, p); });
  add_route("GET", "/v1/guardrails/policy", {TK::Agent, TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return get_guard_policy(r, p); });
  add_route("POST", "/v1/guardrails/budget/reserve", guard_side,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return reserve_guard_budget(r, p); });
  add_route(
      "POST", "/v1/guardrails/budget/settle", guard_side,
      [this](const HttpRequest& r, const PathParams&, const Principal& p) { return end_guard_budget(r, p, true); });
  add_route(
      "POST", "/v1/guardrails/budget/release", guard_side,
      [this](const HttpRequest& r, const PathParams&, const Principal& p) { return end_guard_budget(r, p, false); });
  add_route("GET", "/v1/guardrails/budget", {TK::Agent, TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return get_guard_budget(r, p); });
  add_route("PUT", "/v1/guardrails/alerts", people,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return put_guard_alerts(r, p); });
  add_route("GET", "/v1/guardrails/alerts", people,
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return get_guard_alerts(p); });
  add_route("POST", "/v1/guardrails/alerts/test", people,
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return test_guard_alert(p); });
  add_route("POST", "/v1/guardrails/digest/test", people,
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return test_guard_digest(p); });
  add_route("PUT", "/v1/guardrails/proctor", people,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return put_guard_proctor(r, p); });
  add_route("POST", "/v1/guardrails/proctor/reviews", guard_side,
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return post_proctor_review(r, p); });
  add_route("GET", "/v1/guardrails/proctor", people,
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return get_guard_proctor(p); });

  add_route("PUT", "/v1/webhooks", {TK::Session, TK::Api},
            [this](const HttpRequest& r, const PathParams&, const Principal& p) { return put_webhooks(r, p); });
  add_route("GET", "/v1/webhooks", {TK::Session, TK::Api},
            [this](const HttpRequest&, const PathParams&, const Principal& p) { return get_webhooks(p); });
  // Signed with the workspace's alert secret, not a bearer token (api_webhooks.cpp).
  add_open_route("POST", "/webhooks/alert", [this](const HttpRequest& r, const PathParams&) { return alert(r); });
  add_open_route("POST", "/webhooks/trigger/{id}",
                 [this](const HttpRequest& r, const PathParams& a) { return trigger_scenario(r, a); });

  // The dashboard's files are public; what it shows comes from the API under
  // the session token it signs in for (api_dashboard.cpp).
  add_open_route("GET", "/dashboard", [](const HttpRequest&, const PathParams&) {
    HttpReply r = HttpReply::text(302, "");
    r.headers.emplace_back("Location", "/dashboard/");
    return r;
  });
  add_open_route("GET", "/dashboard/",
                 [](const HttpRequest&, const PathParams&) { return dashboard_file("index.html"); });
  add_open_route("GET", "/dashboard/{file}",
                 [](const HttpRequest&, const PathParams& a) { return dashboard_file(a.at("file")); });
}

Status ControlPlane::start() {
  server_.after(config_.lease_sweep, [this] { sweep_leases(); });
  auto sender = WebhookSender::start(config_.webhook_retry);
  if (!sender) return sender.error();
  webhooks_ = std::move(*sender);
  FL_TRY(server_.watch(webhooks_->event_fd(), [this] { webhook_outcomes(); }));
  server_.after(config_.digest_check, [this] { send_due_digests(); });
  server_.after(config_.scenario_tick, [this] { advance_scenarios(); });
  server_.after(config_.schedule_tick, [this] { fire_schedules(); });
  auto nonce = random_base64url(9);
  if (!nonce) return nonce.error();
  replica_ = *nonce;
  auto listener = store_.listen(kWakeChannel);
  if (!listener) return listener.error();
  listener_ = std::move(*listener);
  if (listener_) FL_TRY(server_.watch(listener_->fd(), [this] { take_notifications(); }));
  return {};
}

void ControlPlane::take_notifications() {
  auto got = listener_->take();
  if (!got) {
    // The listener's connection broke: until it is back, wake-ups from other
    // replicas are missed (agents still get their work at their next poll).
    std::fprintf(stderr, "faultcp: %s; reconnecting in 1 s\n", got.error().describe().c_str());
    server_.unwatch(listener_->fd());
    listener_.reset();
    server_.after(std::chrono::milliseconds(1000), [this] { reopen_listener(); });
    return;
  }
  std::map<int64_t, std::set<int64_t>> agents_by_workspace;  // woken together, a batch per workspace
  for (const auto& payload : *got) {
    // "REPLICA WS AGENT" for an agent; "REPLICA WS approval ID" and
    // "REPLICA WS guard-policy VERSION" for the guards' waits.
    std::istringstream in(payload);
    std::string replica, what;
    int64_t ws = 0, id = 0;
    if (!(in >> replica >> ws >> what) || replica == replica_) continue;
    if (what == "approval" || what == "guard-policy") {
      if (in >> id) wake_guard_local(ws, what == "guard-policy", id);
      continue;
    }
    std::istringstream agent(what);
    if (agent >> id) agents_by_workspace[ws].insert(id);
  }
  for (const auto& [ws, agents] : agents_by_workspace) wake_local(ws, agents);
}

void ControlPlane::reopen_listener() {
  auto listener = store_.listen(kWakeChannel);
  if (listener && *listener && server_.watch((*listener)->fd(), [this] { take_notifications(); })) {
    listener_ = std::move(*listener);
    return;
  }
  server_.after(std::chrono::milliseconds(1000), [this] { reopen_listener(); });
}

void ControlPlane::add_open_route(const std::string& method, const std::string& pattern, RouteHandler handler) {
  router_.add(method, pattern, std::move(handler));
}

void ControlPlane::add_route(const std::string& method, const std::string& pattern,
                             std::initializer_list<TokenKind> kinds, Handler handler) {
  std::vector<TokenKind> allowed(kinds);
  router_.add(method, pattern,
              [this, allowed, handler = std::move(handler)](const HttpRequest& req, const PathParams& params) {
                auto who = authenticate(req, allowed);
                if (auto* reply = std::get_if<HttpReply>(&who)) return *reply;
                return handler(req, params, std::get<Principal>(who));
              });
}

// The one place a request's workspace comes from: the token's row. Handlers
// get it in the Principal and pass it to every store call.
std::variant<Principal, HttpReply> ControlPlane::authenticate(const HttpRequest& req,
                                                              const std::vector<TokenKind>& kinds) {
  auto unauthorized = [](std::string_view why) {
    HttpReply r = api_error(401, why, "authorization");
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  };
  const auto header = req.header("authorization");
  if (!header) return unauthorized("authorization: a bearer token is required");
  constexpr std::string_view kBearer = "Bearer ";
  if (header->size() <= kBearer.size() || header->compare(0, kBearer.size(), kBearer) != 0)
    return unauthorized("authorization: expected 'Bearer TOKEN'");
  const std::string token = header->substr(kBearer.size());
  const auto claimed = token_kind_of(token);
  if (!claimed) return unauthorized("authorization: not a faultcp token");
  auto row = store_.token_by_hash(token_hash(token));
  if (!row) return api_error(500, "storage: " + row.error().describe());
  if (!row->has_value() || token_kind_from_name((*row)->kind) != claimed)
    return unauthorized("authorization: unknown token");
  const TokenRow& t = **row;
  if (t.revoked_ms) return unauthorized("authorization: the token was revoked");
  if (t.expires_ms && now_ms() >= *t.expires_ms) return unauthorized("authorization: the token expired: log in again");
  bool allowed = false;
  for (auto k : kinds) allowed = allowed || k == *claimed;
  if (!allowed) {
    std::string names;
    for (auto k : kinds) names += std::string(names.empty() ? "" : " or ") + token_kind_name(k);
    return api_error(
        403, std::string("authorization: this route takes a ") + names + " token, not " + token_kind_name(*claimed),
        "authorization");
  }
  return Principal{t.workspace_id, *claimed, t.id, t.user_id, t.agent_id};
}

int64_t ControlPlane::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status ControlPlane::audit(const Principal& who, const std::string& action, const std::string& object,
                           const nlohmann::json& detail) {
  return audit_as(who.workspace_id, who.actor(), action, object, detail);
}

Status ControlPlane::audit_as(int64_t workspace_id, const std::string& actor, const std::string& action,
                              const std::string& object, const nlohmann::json& detail) {
  auto e = store_.append_audit(workspace_id, actor, action, object, detail.dump(), now_ms());
  if (!e) {
    ++audit_failures_;
    std::fprintf(stderr, "faultcp: audit append failed (%s %s): %s\n", action.c_str(), object.c_str(),
                 e.error().describe().c_str());
    return e.error();
  }
  return {};
}

HttpReply ControlPlane::storage_error(const Error& e) { return api_error(500, "storage: " + e.describe()); }

HttpReply ControlPlane::healthz() {
  auto v = store_.schema_version();
  if (!v) return api_error(503, "storage: " + v.error().describe());
  return api_json(200, {{"status", "ok"}, {"schema_version", *v}});
}

HttpReply ControlPlane::metrics(const Principal& p) {
  std::string out;
  out += "# HELP faultcp_http_responses_total HTTP responses sent, by status code.\n";
  out += "# TYPE faultcp_http_responses_total counter\n";
  for (const auto& [code, n] : responses_by_code_)
    out += "faultcp_http_responses_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  out += "# HELP faultcp_long_polls_waiting Agent long polls held open now.\n";
  out += "# TYPE faultcp_long_polls_waiting gauge\n";
  out += "faultcp_long_polls_waiting " + std::to_string(polls_.size()) + "\n";
  out +=
      "# HELP faultcp_guard_waits Guard long polls (a held request's decision, a new guard section) held open now.\n";
  out += "# TYPE faultcp_guard_waits gauge\n";
  out += "faultcp_guard_waits " + std::to_string(guard_waits_.size()) + "\n";
  out += "# HELP faultcp_agent_requests_total Requests to the agent routes, by the format asked for.\n";
  out += "# TYPE faultcp_agent_requests_total counter\n";
  out += "faultcp_agent_requests_total{format=\"json\"} " + std::to_string(agent_requests_json_) + "\n";
  out += "faultcp_agent_requests_total{format=\"protobuf\"} " + std::to_string(agent_requests_protobuf_) + "\n";
  out += "# HELP faultcp_audit_append_failures_total Activity-log appends that failed (their actions were undone).\n";
  out += "# TYPE faultcp_audit_append_failures_total counter\n";
  out += "faultcp_audit_append_failures_total " + std::to_string(audit_failures_) + "\n";
  // The caller's workspace only: a token never learns about another tenant.
  auto agents = store_.agent_count(p.workspace_id);
  auto counted = store_.experiments_by_state(p.workspace_id);
  if (!agents || !counted) return api_error(500, "storage: could not count");
  out += "# HELP faultcp_agents Agents enrolled in this workspace.\n# TYPE faultcp_agents gauge\n";
  out += "faultcp_agents " + std::to_string(*agents) + "\n";
  std::map<std::string, int64_t> by_state;
  for (const char* s : {"queued", "dispatched", "running", "completed", "aborted-by-slo", "failed", "cancelled"})
    by_state[s] = 0;
  for (const auto& [state, n] : *counted) by_state[state] = n;
  out += "# HELP faultcp_experiments Experiments of this workspace, by state.\n# TYPE faultcp_experiments gauge\n";
  for (const auto& [state, n] : by_state)
    out += "faultcp_experiments{state=\"" + state + "\"} " + std::to_string(n) + "\n";
  HttpReply r = HttpReply::text(200, out);
  for (auto& [k, v] : r.headers)
    if (k == "Content-Type") v = "text/plain; version=0.0.4; charset=utf-8";
  return r;
}

namespace {
nlohmann::json labels_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() || !j.is_object() ? nlohmann::json::object() : j;
}
}  // namespace

nlohmann::json agent_json(const Agent& a) {
  auto features = nlohmann::json::parse(a.features, nullptr, false);
  return {
      {"id", a.id},
      {"hostname", a.hostname},
      {"kernel", a.kernel},
      {"instance_id", a.instance_id},
      {"device", a.device},
      {"version", a.version},
      {"features", features.is_discarded() ? nlohmann::json::object() : features},
      {"created_ms", a.created_ms},
      {"last_seen_ms", a.last_seen_ms},
      {"killed", a.killed},
      {"labels", labels_json(a.labels)},
      {"policy_version", a.policy_version ? nlohmann::json(*a.policy_version) : nlohmann::json(nullptr)},
      {"policy_status", a.policy_status},
      {"policy_detail", a.policy_detail},
      {"policy_reported_version", a.policy_reported ? nlohmann::json(*a.policy_reported) : nlohmann::json(nullptr)},
      {"policy_reported_ms", a.policy_reported_ms ? nlohmann::json(*a.policy_reported_ms) : nlohmann::json(nullptr)}};
}

nlohmann::json experiment_json(const Experiment& e) {
  auto spec = nlohmann::json::parse(e.spec, nullptr, false);
  nlohmann::json record = nullptr;
  if (e.record) {
    record = nlohmann::json::parse(*e.record, nullptr, false);
    if (record.is_discarded()) record = nullptr;
  }
  nlohmann::json j{{"id", e.id},
                   {"agent_id", e.agent_id},
                   {"status", e.state},
                   {"detail", e.detail},
                   {"spec", spec.is_discarded() ? nlohmann::json::object() : spec},
                   {"record", record},
                   {"created_ms", e.created_ms},
                   {"updated_ms", e.updated_ms},
                   {"stop_requested", e.stop_requested}};
  j["lease_until_ms"] = e.lease_until_ms ? nlohmann::json(*e.lease_until_ms) : nlohmann::json(nullptr);
  j["started_ms"] = e.started_ms ? nlohmann::json(*e.started_ms) : nlohmann::json(nullptr);
  return j;
}

namespace {

void append_json_member(std::string& out, const char* key) {
  out += '"';
  out += key;
  out += "\":";
}

void append_json_number(std::string& out, std::optional<int64_t> v) { out += v ? std::to_string(*v) : "null"; }

}  // namespace

void append_experiment_json(std::string& out, const Experiment& e) {
  // The members in experiment_json()'s order (nlohmann's: sorted by key). The
  // spec and the record are stored as JSON texts faultcp wrote: copied as they
  // are once they read as JSON (no DOM built), as experiment_json() falls back.
  out += '{';
  append_json_member(out, "agent_id");
  append_json_number(out, e.agent_id);
  out += ',';
  append_json_member(out, "created_ms");
  append_json_number(out, e.created_ms);
  out += ',';
  append_json_member(out, "detail");
  append_json_quoted(out, e.detail);
  out += ',';
  append_json_member(out, "id");
  append_json_number(out, e.id);
  out += ',';
  append_json_member(out, "lease_until_ms");
  append_json_number(out, e.lease_until_ms);
  out += ',';
  append_json_member(out, "record");
  if (e.record && nlohmann::json::accept(*e.record))
    out += *e.record;
  else
    out += "null";
  out += ',';
  append_json_member(out, "spec");
  if (nlohmann::json::accept(e.spec))
    out += e.spec;
  else
    out += "{}";
  out += ',';
  append_json_member(out, "started_ms");
  append_json_number(out, e.started_ms);
  out += ',';
  append_json_member(out, "status");
  append_json_quoted(out, e.state);
  out += ',';
  append_json_member(out, "stop_requested");
  out += e.stop_requested ? "true" : "false";
  out += ',';
  append_json_member(out, "updated_ms");
  append_json_number(out, e.updated_ms);
  out += '}';
}

nlohmann::json audit_entry_json(const AuditEntry& e) {
  return {{"seq", e.seq},       {"at_ms", e.at_ms},   {"actor", e.actor},         {"action", e.action},
          {"object", e.object}, {"detail", e.detail}, {"prev_hash", e.prev_hash}, {"hash", e.hash}};
}

}  // namespace faultline::cp
