// Webhooks: a workspace's configuration (PUT|GET /v1/webhooks), the outbound
// events (experiment start/end/abort, kill) handed to the sender thread with a
// cooldown per trigger, and the inbound alert (POST /webhooks/alert) that
// aborts matching experiments once its signature, time and novelty are checked.
#include <algorithm>
#include <cstdio>

#include "cp/api/alert_payload.h"
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"

namespace faultline::cp {
namespace {

const std::vector<FieldRule> kWebhookFields = {
    {"url", JsonType::String, true},     {"secret", JsonType::String, true},  {"alert_secret", JsonType::String},
    {"triggers", JsonType::Array, true}, {"cooldown_sec", JsonType::Integer},
};
const char* const kTriggers[] = {"experiment.start", "experiment.end", "experiment.abort", "kill", "proposal"};
constexpr int64_t kMaxCooldownSec = 86'400;

std::string label(const nlohmann::json& labels, const char* name) {
  return labels.contains(name) ? labels[name].get<std::string>() : "";
}

}  // namespace

HttpReply ControlPlane::put_webhooks(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kWebhookFields)) return e->reply();
  WebhookConfig c;
  c.url = j["url"].get<std::string>();
  if (auto url = parse_webhook_url(c.url); !url) return ApiError{400, "url", url.error().message}.reply();
  c.secret = j["secret"].get<std::string>();
  c.alert_secret = j.value("alert_secret", "");
  for (const char* name : {"secret", "alert_secret"}) {
    const std::string& s = std::string(name) == "secret" ? c.secret : c.alert_secret;
    if ((name == std::string("secret") || j.contains(name)) && (s.size() < 16 || s.size() > 256))
      return ApiError{400, name, "must be 16-256 characters"}.reply();
  }
  if (!c.alert_secret.empty() && c.alert_secret == c.secret)
    return ApiError{400, "alert_secret", "must differ from secret (whoever receives the events knows secret)"}.reply();
  const auto& triggers = j["triggers"];
  for (size_t i = 0; i < triggers.size(); ++i) {
    const std::string field = "triggers[" + std::to_string(i) + "]";
    if (!triggers[i].is_string()) return ApiError{400, field, "must be a string"}.reply();
    const auto t = triggers[i].get<std::string>();
    if (std::none_of(std::begin(kTriggers), std::end(kTriggers), [&](const char* k) { return t == k; }))
      return ApiError{400, field, "must be experiment.start, experiment.end, experiment.abort, kill or proposal"}
          .reply();
    if (std::find(c.triggers.begin(), c.triggers.end(), t) != c.triggers.end())
      return ApiError{400, field, "is listed twice"}.reply();
    c.triggers.push_back(t);
  }
  c.cooldown_sec = j.value("cooldown_sec", int64_t{0});
  if (c.cooldown_sec < 0 || c.cooldown_sec > kMaxCooldownSec)
    return ApiError{400, "cooldown_sec", "must be within 0-86400"}.reply();
  c.updated_ms = now_ms();
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  if (auto put = store_.put_webhook(p.workspace_id, c); !put) return storage_error(put.error());
  if (auto a = audit(p, "webhook.update", "workspace:" + std::to_string(p.workspace_id),
                     {{"url", c.url},
                      {"triggers", c.triggers},
                      {"cooldown_sec", c.cooldown_sec},
                      {"alerts", !c.alert_secret.empty()}});
      !a)
    return storage_error(a.error());
  if (auto done = tx.commit(); !done) return storage_error(done.error());
  return api_json(200, webhook_json(c));
}

HttpReply ControlPlane::get_webhooks(const Principal& p) {
  auto c = store_.webhook(p.workspace_id);
  if (!c) return storage_error(c.error());
  return api_json(200, {{"webhook", c->has_value() ? webhook_json(**c) : nlohmann::json(nullptr)}});
}

// Secrets are never shown again: only whether they are set.
nlohmann::json ControlPlane::webhook_json(const WebhookConfig& c) {
  return {{"url", c.url},
          {"triggers", c.triggers},
          {"cooldown_sec", c.cooldown_sec},
          {"secret_set", !c.secret.empty()},
          {"alert_secret_set", !c.alert_secret.empty()},
          {"updated_ms", c.updated_ms}};
}

void ControlPlane::fire_webhook(int64_t ws, const std::string& trigger, const std::string& title,
                                const std::string& text, const nlohmann::json& fields) {
  if (!webhooks_) return;
  auto c = store_.webhook(ws);
  if (!c || !c->has_value()) return;
  const WebhookConfig& config = **c;
  if (std::find(config.triggers.begin(), config.triggers.end(), trigger) == config.triggers.end()) return;
  auto url = parse_webhook_url(config.url);
  if (!url) return;
  // The cooldown: one delivery of a trigger per workspace per cooldown_sec (a
  // flapping alert or a kill storm does not flood the receiver).
  const int64_t now = now_ms();
  auto& last = last_fired_ms_[{ws, trigger}];
  if (config.cooldown_sec > 0 && last != 0 && now - last < config.cooldown_sec * 1000) {
    (void)audit_as(ws, "faultcp", "webhook.suppressed", "webhook:" + trigger,
                   {{"title", title}, {"cooldown_left_ms", config.cooldown_sec * 1000 - (now - last)}});
    return;
  }
  last = now;
  WebhookDelivery d;
  d.id = ++next_delivery_;
  d.workspace_id = ws;
  d.trigger = trigger;
  d.url = *url;
  d.url_text = config.url;
  d.secret = config.secret;
  d.envelope = {{"source", "faultcp"}, {"trigger", trigger}, {"title", title}, {"text", text}, {"fields", fields}};
  if (!webhooks_->send(std::move(d)))
    (void)audit_as(ws, "faultcp", "webhook.dropped", "webhook:" + trigger, {{"reason", "the send queue is full"}});
}

void ControlPlane::webhook_outcomes() {
  for (const auto& o : webhooks_->take_outcomes()) {
    nlohmann::json detail{{"delivery", o.id}, {"url", o.url}, {"attempts", o.attempts}, {"status", o.status}};
    if (!o.delivered) detail["error"] = o.error;
    (void)audit_as(o.workspace_id, "faultcp", o.delivered ? "webhook.delivered" : "webhook.failed",
                   "webhook:" + o.trigger, detail);
  }
}

void ControlPlane::fire_experiment_webhook(const Experiment& e, const std::string& trigger, const std::string& by) {
  std::string hostname;
  if (auto a = store_.agent(e.workspace_id, e.agent_id); a && a->has_value()) hostname = (*a)->hostname;
  auto spec = nlohmann::json::parse(e.spec, nullptr, false);
  const std::string kind = spec.is_object() ? spec.value("kind", "") : "";
  const std::string verb = trigger == "experiment.start" ? "started"
                           : trigger == "experiment.end" ? "ended"
                                                         : "aborted";
  fire_webhook(e.workspace_id, trigger, "Experiment " + std::to_string(e.id) + " " + verb,
               kind + " experiment " + std::to_string(e.id) + " on " + hostname + " is " + e.state +
                   (e.detail.empty() ? "" : ": " + e.detail),
               {{"experiment_id", e.id},
                {"agent_id", e.agent_id},
                {"hostname", hostname},
                {"kind", kind},
                {"state", e.state},
                {"detail", e.detail},
                {"by", by}});
}

// A signed inbound hook's checks (an alert, a trigger), in the order a
// caller can fix them: which workspace, when it was signed, the signature.
// Whether it was seen before is the caller's last check (recorded in the
// database with what the hook does, so every replica refuses a replay, and a
// refused hook leaves nothing behind but its audited refusal, `kind`.refused).
std::variant<ControlPlane::SignedHook, HttpReply> ControlPlane::verify_signed_hook(const HttpRequest& req,
                                                                                   const std::string& kind,
                                                                                   const std::string& route) {
  const auto name = req.query_param("workspace");
  if (!name || name->empty())
    return api_error(400, "workspace: name the workspace: POST " + route + "?workspace=NAME", "workspace");
  auto ws = store_.workspace_by_name(*name);
  if (!ws) return storage_error(ws.error());
  std::optional<WebhookConfig> config;
  if (ws->has_value())
    if (auto c = store_.webhook((*ws)->id); c && c->has_value() && !(*c)->alert_secret.empty()) config = **c;
  if (!config)
    return api_error(404,
                     "workspace: no workspace '" + *name + "' takes signed hooks (PUT /v1/webhooks with alert_secret)",
                     "workspace");
  SignedHook hook{(*ws)->id, kind + ":" + req.peer.address, ""};
  auto refuse = [&](int status, const std::string& field, const std::string& why) {
    (void)refuse_signed_hook(hook, kind, field, why);
    return api_error(status, field + ": " + why, field);
  };
  const auto ts_text = req.header("x-faultline-timestamp");
  if (!ts_text) return refuse(401, "X-Faultline-Timestamp", "is required (Unix seconds, signed with the body)");
  if (ts_text->empty() || ts_text->size() > 12 || ts_text->find_first_not_of("0123456789") != std::string::npos)
    return refuse(400, "X-Faultline-Timestamp", "must be Unix seconds");
  const int64_t skew = std::stoll(*ts_text) - now_ms() / 1000;
  const int64_t window = config_.alert_window.count();
  if (skew > window || skew < -window)
    return refuse(401, "X-Faultline-Timestamp",
                  "is " + std::to_string(skew < 0 ? -skew : skew) + " s " + (skew < 0 ? "old" : "ahead") +
                      ": at most " + std::to_string(window) + " s either way");
  const auto sig = req.header("x-faultline-signature");
  if (!sig) return refuse(401, "X-Faultline-Signature", "is required (sha256=HEX)");
  const std::string expected = webhook_signature(config->alert_secret, std::stoll(*ts_text), req.body);
  if (!constant_time_equal(*sig, expected))
    return refuse(401, "X-Faultline-Signature",
                  "does not match: sign TIMESTAMP.BODY with the alert_secret of workspace '" + *name + "'");
  hook.signature = *sig;
  return hook;
}

Status ControlPlane::refuse_signed_hook(const SignedHook& hook, const std::string& kind, const std::string& field,
                                        const std::string& why) {
  return audit_as(hook.workspace_id, hook.actor, kind + ".refused", "workspace:" + std::to_string(hook.workspace_id),
                  {{"field", field}, {"reason", why}});
}

// Whether a verified hook's signature is new (recorded now, inside the
// caller's transaction); false for a replay.
Result<bool> ControlPlane::first_delivery(const SignedHook& hook) {
  const int64_t window = config_.alert_window.count();
  return store_.remember_alert_signature(hook.workspace_id, hook.signature, now_ms(), now_ms() - 2 * window * 1000);
}

HttpReply ControlPlane::alert(const HttpRequest& req) {
  auto verified = verify_signed_hook(req, "alert", "/webhooks/alert");
  if (auto* r = std::get_if<HttpReply>(&verified)) return *r;
  const SignedHook& hook = std::get<SignedHook>(verified);
  const int64_t ws_id = hook.workspace_id;
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_alert_payload(j)) return e->reply();

  auto active = store_.active_experiments(ws_id);
  if (!active) return storage_error(active.error());
  auto agents = store_.agents(ws_id);
  if (!agents) return storage_error(agents.error());
  // Which experiments each firing alert names: faultline_experiment (an id),
  // faultline_agent (an agent id) or hostname (an agent's); an alert with none
  // of these labels stands for the whole workspace.
  std::set<int64_t> chosen;
  nlohmann::json names = nlohmann::json::array();
  for (const auto& a : j["alerts"]) {
    const std::string status = a.value("status", j.value("status", "firing"));
    if (status != "firing") continue;
    const auto& labels = a["labels"];
    names.push_back(label(labels, "alertname"));
    const std::string exp = label(labels, "faultline_experiment"), agent = label(labels, "faultline_agent"),
                      host = label(labels, "hostname");
    for (const auto& e : *active) {
      bool match = true;
      if (!exp.empty()) match = match && std::to_string(e.id) == exp;
      if (!agent.empty()) match = match && std::to_string(e.agent_id) == agent;
      if (!host.empty())
        match = match && std::any_of(agents->begin(), agents->end(),
                                     [&](const Agent& g) { return g.id == e.agent_id && g.hostname == host; });
      if (match) chosen.insert(e.id);
    }
  }
  const std::string& actor = hook.actor;
  std::optional<SqlTransaction> tx;
  tx.emplace(store_.sql());
  if (auto begun = store_.begin(*tx, ws_id); !begun) return storage_error(begun.error());
  auto fresh = first_delivery(hook);
  if (!fresh) return storage_error(fresh.error());
  if (!*fresh) {
    tx.reset();  // rolled back: nothing of this request is kept but its refusal
    (void)refuse_signed_hook(hook, "alert", "X-Faultline-Signature", "a replay: this alert was taken already");
    return api_error(409, "X-Faultline-Signature: a replay: this alert was taken already", "X-Faultline-Signature");
  }
  std::vector<Experiment> aborted;
  const std::string why =
      "aborted by alert " + (names.empty() ? std::string("(resolved)") : names[0].get<std::string>());
  for (int64_t id : chosen) {
    auto moved =
        store_.transition(ws_id, id, {"queued", "dispatched", "running"}, "cancelled", why, std::nullopt, now_ms());
    if (!moved) return storage_error(moved.error());
    if (!moved->has_value()) continue;
    if (auto a = audit_as(ws_id, actor, "experiment.abort", "experiment:" + std::to_string(id), {{"by", "alert"}}); !a)
      return storage_error(a.error());
    aborted.push_back(**moved);
  }
  nlohmann::json ids = nlohmann::json::array();
  for (const auto& e : aborted) ids.push_back(e.id);
  if (auto a = audit_as(ws_id, actor, "alert.received", "workspace:" + std::to_string(ws_id),
                        {{"status", j.value("status", "")},
                         {"alerts", names},
                         {"receiver", j.value("receiver", "")},
                         {"aborted", ids}});
      !a)
    return storage_error(a.error());
  if (auto done = tx->commit(); !done) return storage_error(done.error());
  for (const auto& e : aborted) {
    wake_agent(ws_id, e.agent_id);
    fire_experiment_webhook(e, "experiment.abort", actor);
  }
  return api_json(200, {{"aborted", ids}, {"alerts", j["alerts"].size()}});
}

}  // namespace faultline::cp
