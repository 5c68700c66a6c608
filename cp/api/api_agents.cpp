// Enrollment, the agents' long poll for work and their reports.
#include <cstdio>

#include "cp/api/agent_selector.h"
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/proto/agent_wire.h"

namespace faultline::cp {
namespace {

const std::vector<FieldRule> kRegisterFields = {
    {"hostname", JsonType::String, true}, {"kernel", JsonType::String},  {"instance_id", JsonType::String},
    {"device", JsonType::String},         {"version", JsonType::String}, {"features", JsonType::Object},
    {"labels", JsonType::Object},
};
const std::vector<FieldRule> kPolicyReportFields = {
    {"version", JsonType::Integer, true},
    {"status", JsonType::String, true},
    {"running_version", JsonType::Integer},
    {"detail", JsonType::String},
};
const std::vector<FieldRule> kEventFields = {
    {"experiment_id", JsonType::Integer, true},
    {"type", JsonType::String, true},
    {"detail", JsonType::String},
    {"record", JsonType::Object},
};
constexpr size_t kMaxFactChars = 256;
constexpr size_t kMaxDetailChars = 4096;

// The agent routes speak protobuf (cp/proto/agent.proto) to faultd and JSON to
// people and scripts: a body of Content-Type application/x-protobuf is decoded
// into the object its JSON form would be (the same field checks follow), and an
// answer is a protobuf message when Accept lists application/x-protobuf.
// Errors are JSON either way.
std::variant<nlohmann::json, ApiError> agent_body(const HttpRequest& req, wire::Decoded (*decode)(std::string_view)) {
  auto type = req.header("content-type");
  if (!type || !wire::is_protobuf_type(*type)) return parse_body(req.body);
  auto d = decode(req.body);
  if (auto* e = std::get_if<wire::WireError>(&d)) return ApiError{400, e->field, e->message};
  return std::get<nlohmann::json>(std::move(d));
}

bool wants_protobuf(const HttpRequest& req) {
  auto accept = req.header("accept");
  return accept && wire::accepts_protobuf(*accept);
}

HttpReply agent_answer(bool protobuf, int status, const nlohmann::json& j,
                       std::string (*encode)(const nlohmann::json&)) {
  if (!protobuf) return api_json(status, j);
  HttpReply r;
  r.status = status;
  r.headers = {{"Content-Type", std::string(wire::kProtobufType)}};
  r.body = encode(j);
  return r;
}

}  // namespace

void ControlPlane::count_agent_request(const HttpRequest& req) {
  ++(wants_protobuf(req) ? agent_requests_protobuf_ : agent_requests_json_);
}

HttpReply ControlPlane::register_agent(const HttpRequest& req, const Principal& p) {
  count_agent_request(req);
  auto body = agent_body(req, wire::decode_register);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kRegisterFields)) return e->reply();
  AgentFacts facts;
  for (auto [field, out] : {std::pair<const char*, std::string*>{"hostname", &facts.hostname},
                            {"kernel", &facts.kernel},
                            {"instance_id", &facts.instance_id},
                            {"device", &facts.device},
                            {"version", &facts.version}}) {
    *out = j.value(field, "");
    if (out->size() > kMaxFactChars) return ApiError{400, field, "is over 256 characters"}.reply();
  }
  if (facts.hostname.empty()) return ApiError{400, "hostname", "is empty"}.reply();
  facts.features = j.value("features", nlohmann::json::object()).dump();
  if (facts.features.size() > 16 * 1024) return ApiError{400, "features", "is over 16 KiB"}.reply();
  if (j.contains("labels")) {
    if (auto e = check_labels(j["labels"], "labels")) return e->reply();
    facts.labels = j["labels"].dump();
  }
  auto minted = mint_token(TokenKind::Agent);
  if (!minted) return api_error(500, minted.error().describe());
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto agent = store_.insert_agent(p.workspace_id, facts, now_ms());
  if (!agent) return storage_error(agent.error());
  auto row = store_.insert_token(p.workspace_id, "agent", minted->hash, minted->hint, facts.hostname, std::nullopt,
                                 agent->id, now_ms());
  if (!row) return storage_error(row.error());
  if (auto a = audit(p, "agent.register", "agent:" + std::to_string(agent->id),
                     {{"hostname", facts.hostname},
                      {"instance_id", facts.instance_id},
                      {"labels", nlohmann::json::parse(facts.labels)},
                      {"enrollment_token", p.token_id}});
      !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  return agent_answer(wants_protobuf(req), 201, {{"agent_id", agent->id}, {"token", minted->secret}},
                      wire::encode_register_reply);
}

HttpReply ControlPlane::list_agents(const Principal& p) {
  auto rows = store_.agents(p.workspace_id);
  if (!rows) return api_error(500, "storage: " + rows.error().describe());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& a : *rows) list.push_back(agent_json(a));
  return api_json(200, {{"agents", list}});
}

HttpReply ControlPlane::get_agent(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such agent");
  auto a = store_.agent(p.workspace_id, *id);
  if (!a) return api_error(500, "storage: " + a.error().describe());
  if (!a->has_value()) return api_error(404, "no such agent");
  return api_json(200, agent_json(**a));
}

// "kill": the workspace's or the agent's own switch is engaged.
Result<nlohmann::json> ControlPlane::idle_payload(int64_t ws, int64_t agent_id) {
  auto w = store_.workspace(ws);
  if (!w) return w.error();
  auto a = store_.agent(ws, agent_id);
  if (!a) return a.error();
  const bool killed = (w->has_value() && (*w)->killed) || (a->has_value() && (*a)->killed);
  return nlohmann::json{{"experiment", nullptr}, {"stop", nlohmann::json::array()}, {"kill", killed}};
}

Result<ControlPlane::KnownStops> ControlPlane::known_stops(int64_t ws) {
  KnownStops k;
  auto w = store_.workspace(ws);
  if (!w) return w.error();
  k.workspace_killed = w->has_value() && (*w)->killed;
  auto killed = store_.killed_agents(ws);
  if (!killed) return killed.error();
  k.killed_agents = std::move(*killed);
  auto stops = store_.pending_stops_by_agent(ws);
  if (!stops) return stops.error();
  k.stops = std::move(*stops);
  return k;
}

Result<std::optional<nlohmann::json>> ControlPlane::next_payload(int64_t ws, int64_t agent_id, uint64_t exchange,
                                                                 const KnownStops* known) {
  std::vector<int64_t> stops;
  Result<nlohmann::json> payload = nlohmann::json();
  if (known) {
    const bool killed = known->workspace_killed || known->killed_agents.contains(agent_id);
    payload = nlohmann::json{{"experiment", nullptr}, {"stop", nlohmann::json::array()}, {"kill", killed}};
    if (auto it = known->stops.find(agent_id); it != known->stops.end()) stops = it->second;
  } else {
    payload = idle_payload(ws, agent_id);
    if (!payload) return payload.error();
    auto pending = store_.pending_stops(ws, agent_id);
    if (!pending) return pending.error();
    stops = std::move(*pending);
  }
  // Stops first: an agent told to stop and to start in one answer would
  // start before it read the rest.
  if (!stops.empty()) {
    (*payload)["stop"] = stops;
    return std::optional<nlohmann::json>(*payload);
  }
  // A policy version the agent has not reported on comes next, alone: the
  // agent applies it (or removes what it applied, when not selected), reports,
  // and polls again for work.
  auto policy = policy_for_agent(ws, agent_id);
  if (!policy) return policy.error();
  if (policy->has_value()) {
    (*payload)["policy"] = **policy;
    return std::optional<nlohmann::json>(*payload);
  }
  // Claim only for a client still there: an experiment claimed for a poll
  // whose client hung up would wait out its lease and fail.
  if (exchange != 0 && !server_.waiting(exchange)) return std::optional<nlohmann::json>{};
  SqlTransaction tx(store_.sql());
  FL_TRY(store_.begin(tx, ws));
  auto claimed = store_.claim_next(ws, agent_id, now_ms(), now_ms() + config_.lease.count());
  if (!claimed) return claimed.error();
  if (!claimed->has_value()) return std::optional<nlohmann::json>{};
  FL_TRY(audit_as(ws, "agent:" + std::to_string(agent_id), "experiment.dispatch",
                  "experiment:" + std::to_string((*claimed)->id), {{"lease_until_ms", *(*claimed)->lease_until_ms}}));
  FL_TRY(tx.commit());
  (*payload)["experiment"] = experiment_json(**claimed);
  return std::optional<nlohmann::json>(*payload);
}

HttpReply ControlPlane::next_for_agent(const HttpRequest& req, const PathParams& params, const Principal& p) {
  count_agent_request(req);
  const auto id = path_id(params);
  // An agent token speaks for its own agent only.
  if (!id || !p.agent_id || *id != *p.agent_id) return api_error(404, "no such agent");
  auto wait = config_.poll_timeout;
  if (auto w = req.query_param("wait_ms")) {
    if (w->empty() || w->size() > 9 || w->find_first_not_of("0123456789") != std::string::npos)
      return api_error(400, "wait_ms: must be a number of milliseconds", "wait_ms");
    wait = std::min(wait, std::chrono::milliseconds(std::stoll(*w)));
  }
  (void)store_.touch_agent(p.workspace_id, *id, now_ms());
  auto ready = next_payload(p.workspace_id, *id, 0);
  if (!ready) return api_error(500, "storage: " + ready.error().describe());
  const bool protobuf = wants_protobuf(req);
  if (ready->has_value()) return agent_answer(protobuf, 200, **ready, wire::encode_next_reply);
  if (wait.count() == 0) {
    auto idle = idle_payload(p.workspace_id, *id);
    if (!idle) return api_error(500, "storage: " + idle.error().describe());
    return agent_answer(protobuf, 200, *idle, wire::encode_next_reply);
  }
  polls_[req.exchange] = Poll{p.workspace_id, *id, protobuf};
  const uint64_t exchange = req.exchange;
  server_.after(wait, [this, exchange] { end_poll(exchange); });
  return HttpReply::later();
}

void ControlPlane::end_poll(uint64_t exchange) {
  auto it = polls_.find(exchange);
  if (it == polls_.end()) return;  // answered already
  const Poll poll = it->second;
  polls_.erase(it);
  if (!server_.waiting(exchange)) return;
  auto idle = idle_payload(poll.workspace_id, poll.agent_id);
  server_.complete(exchange, idle ? agent_answer(poll.protobuf, 200, *idle, wire::encode_next_reply)
                                  : api_error(500, "storage: " + idle.error().describe()));
}

void ControlPlane::wake_agents(int64_t ws, const std::set<int64_t>& agent_ids) {
  if (agent_ids.empty()) return;
  // Another replica may hold these agents' polls: tell them all (PostgreSQL).
  std::vector<std::string> payloads;
  payloads.reserve(agent_ids.size());
  for (int64_t a : agent_ids) payloads.push_back(replica_ + " " + std::to_string(ws) + " " + std::to_string(a));
  if (auto told = store_.notify(kWakeChannel, payloads); !told)
    std::fprintf(stderr, "faultcp: NOTIFY: %s\n", told.error().describe().c_str());
  wake_local(ws, agent_ids);
}

void ControlPlane::wake_local(int64_t ws, const std::set<int64_t>& agent_ids) {
  const bool every = agent_ids.contains(kEveryAgent);
  std::vector<std::pair<uint64_t, Poll>> mine;
  for (const auto& [exchange, poll] : polls_)
    if (poll.workspace_id == ws && (every || agent_ids.contains(poll.agent_id))) mine.emplace_back(exchange, poll);
  // Many polls at once (the kill switch): the switches and the stops are read
  // once for all of them, not three queries per agent.
  std::optional<KnownStops> known;
  if (mine.size() > 1) {
    auto k = known_stops(ws);
    if (!k) {
      for (const auto& [exchange, poll] : mine) {
        polls_.erase(exchange);
        if (server_.waiting(exchange)) server_.complete(exchange, api_error(500, "storage: " + k.error().describe()));
      }
      return;
    }
    known = std::move(*k);
  }
  for (const auto& [exchange, poll] : mine) {
    if (!server_.waiting(exchange)) {
      polls_.erase(exchange);  // the client hung up
      continue;
    }
    auto payload = next_payload(ws, poll.agent_id, exchange, known ? &*known : nullptr);
    if (!payload) {
      polls_.erase(exchange);
      server_.complete(exchange, api_error(500, "storage: " + payload.error().describe()));
    } else if (payload->has_value()) {
      polls_.erase(exchange);
      server_.complete(exchange, agent_answer(poll.protobuf, 200, **payload, wire::encode_next_reply));
    }
  }
}

HttpReply ControlPlane::agent_event(const HttpRequest& req, const PathParams& params, const Principal& p) {
  count_agent_request(req);
  const auto id = path_id(params);
  if (!id || !p.agent_id || *id != *p.agent_id) return api_error(404, "no such agent");
  auto body = agent_body(req, wire::decode_event);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kEventFields)) return e->reply();
  const auto type = j["type"].get<std::string>();
  const bool final_type = type == "completed" || type == "aborted-by-slo" || type == "failed";
  if (type != "running" && type != "progress" && type != "stopped" && !final_type)
    return ApiError{400, "type", "must be running, progress, completed, aborted-by-slo, failed or stopped"}.reply();
  const std::string detail = j.value("detail", "");
  if (detail.size() > kMaxDetailChars) return ApiError{400, "detail", "is over 4096 characters"}.reply();
  std::optional<std::string> record;
  if (j.contains("record")) record = j["record"].dump();
  const int64_t exp_id = j["experiment_id"].get<int64_t>();
  auto exp = store_.experiment(p.workspace_id, exp_id);
  if (!exp) return api_error(500, "storage: " + exp.error().describe());
  if (!exp->has_value() || (*exp)->agent_id != *id) return api_error(404, "no such experiment", "experiment_id");
  const Experiment& e = **exp;
  const std::string object = "experiment:" + std::to_string(exp_id);

  // A cancelled experiment the agent still holds: any report that it ended
  // (or "stopped") confirms the stop; the state stays cancelled.
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  if (e.stop_requested && (final_type || type == "stopped")) {
    auto ok = store_.confirm_stop(p.workspace_id, exp_id, record, now_ms());
    if (!ok) return storage_error(ok.error());
    if (auto a = audit(p, "agent.event.stopped", object, {{"reported", type}, {"detail", detail}}); !a)
      return storage_error(a.error());
    if (auto c = tx.commit(); !c) return storage_error(c.error());
    auto now = store_.experiment(p.workspace_id, exp_id);
    return agent_answer(wants_protobuf(req), 200, experiment_json(now.ok() && now->has_value() ? **now : e),
                        wire::encode_event_reply);
  }
  if (e.stop_requested)
    return api_error(409, "experiment " + std::to_string(exp_id) + " was cancelled (" + e.detail + "): stop it",
                     "experiment_id");
  if (type == "stopped")
    return api_error(409, "experiment " + std::to_string(exp_id) + " was not asked to stop", "type");
  std::vector<std::string> from;
  std::string to = type;
  if (type == "running") {
    from = {"dispatched"};
  } else if (type == "progress") {
    from = {"running"};
    to = "running";
  } else {
    from = {"dispatched", "running"};
  }
  auto moved = store_.transition(p.workspace_id, exp_id, from, to, detail, record, now_ms());
  if (!moved) return storage_error(moved.error());
  if (!moved->has_value())
    return api_error(409, "experiment " + std::to_string(exp_id) + " is " + e.state + ": cannot take '" + type + "'",
                     "type");
  if (auto a = audit(p, "agent.event." + type, object, {{"detail", detail}}); !a) return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  if (type == "running")
    fire_experiment_webhook(**moved, "experiment.start", p.actor());
  else if (type == "aborted-by-slo")
    fire_experiment_webhook(**moved, "experiment.abort", p.actor());
  else if (final_type)
    fire_experiment_webhook(**moved, "experiment.end", p.actor());
  return agent_answer(wants_protobuf(req), 200, experiment_json(**moved), wire::encode_event_reply);
}

Result<std::optional<nlohmann::json>> ControlPlane::policy_for_agent(int64_t ws, int64_t agent_id) {
  auto bundle = store_.policy(ws);
  if (!bundle) return bundle.error();
  if (!bundle->has_value()) return std::optional<nlohmann::json>{};
  auto agent = store_.agent(ws, agent_id);
  if (!agent) return agent.error();
  if (!agent->has_value()) return std::optional<nlohmann::json>{};
  const PolicyBundle& b = **bundle;
  const Agent& a = **agent;
  if (a.policy_reported && *a.policy_reported == b.version) return std::optional<nlohmann::json>{};
  auto sel = parse_selector(nlohmann::json::parse(b.selector, nullptr, false), "selector");
  const auto* s = std::get_if<AgentSelector>(&sel);
  const bool selected = s != nullptr && s->matches(a);
  return std::optional<nlohmann::json>(
      nlohmann::json{{"version", b.version}, {"selected", selected}, {"text", selected ? b.policy : ""}});
}

HttpReply ControlPlane::agent_policy_report(const HttpRequest& req, const PathParams& params, const Principal& p) {
  count_agent_request(req);
  const auto id = path_id(params);
  if (!id || !p.agent_id || *id != *p.agent_id) return api_error(404, "no such agent");
  auto body = agent_body(req, wire::decode_policy_report);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kPolicyReportFields)) return e->reply();
  PolicyReport r;
  r.about_version = j["version"].get<int64_t>();
  r.status = j["status"].get<std::string>();
  r.detail = j.value("detail", "");
  if (j.contains("running_version")) r.running_version = j["running_version"].get<int64_t>();
  if (r.status != "applied" && r.status != "failed" && r.status != "not-selected")
    return ApiError{400, "status", "must be applied, failed or not-selected"}.reply();
  if (r.detail.size() > kMaxDetailChars) return ApiError{400, "detail", "is over 4096 characters"}.reply();
  auto about = store_.policy(p.workspace_id, r.about_version);
  if (!about) return storage_error(about.error());
  if (!about->has_value()) return api_error(404, "version: no such policy version", "version");
  if (r.running_version) {
    auto running = store_.policy(p.workspace_id, *r.running_version);
    if (!running) return storage_error(running.error());
    if (!running->has_value()) return api_error(404, "running_version: no such policy version", "running_version");
  }
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto kept = store_.report_policy(p.workspace_id, *id, r, now_ms());
  if (!kept) return storage_error(kept.error());
  if (!*kept) return api_error(404, "no such agent");
  nlohmann::json detail{{"version", r.about_version}, {"detail", r.detail}};
  detail["running_version"] = r.running_version ? nlohmann::json(*r.running_version) : nlohmann::json(nullptr);
  if (auto a = audit(p, "agent.policy." + r.status, "policy:" + std::to_string(r.about_version), detail); !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  nlohmann::json out{{"version", r.about_version}, {"status", r.status}, {"detail", r.detail}};
  if (r.running_version) out["running_version"] = *r.running_version;
  return agent_answer(wants_protobuf(req), 200, out, wire::encode_policy_report);
}

void ControlPlane::sweep_leases() {
  auto fail_one = [this](const Experiment& e) -> Status {
    SqlTransaction tx(store_.sql());
    FL_TRY(store_.begin(tx, e.workspace_id));
    auto failed = store_.expire_lease(e.workspace_id, e.id, now_ms());
    if (!failed) return failed.error();
    if (!failed->has_value()) return {};  // its agent said "running" meanwhile
    FL_TRY(audit_as(e.workspace_id, "faultcp", "experiment.lease_expired", "experiment:" + std::to_string(e.id),
                    {{"agent_id", e.agent_id}}));
    return tx.commit();
  };
  auto expired = store_.expired_leases(now_ms());
  if (!expired) std::fprintf(stderr, "faultcp: lease sweep: %s\n", expired.error().describe().c_str());
  for (const auto& e : expired.value_or({}))
    if (auto done = fail_one(e); !done)
      std::fprintf(stderr, "faultcp: lease sweep, experiment %lld: %s\n", static_cast<long long>(e.id),
                   done.error().describe().c_str());
  server_.after(config_.lease_sweep, [this] { sweep_leases(); });
}

}  // namespace faultline::cp
