// Experiments (create, list, show, abort) and the workspace kill switch.
#include "cp/api/agent_selector.h"
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/api/experiment_spec.h"

namespace faultline::cp {
namespace {

const std::vector<FieldRule> kCreateFields = {
    {"agent_id", JsonType::Integer}, {"selector", JsonType::Object}, {"spec", JsonType::Object, true}};
constexpr int64_t kMaxList = 1000;

}  // namespace

// The agents an experiment is for: {"agent_id": N}, or a selector of the
// workspace's agents (agent_selector.h: {"all": true}, or hostnames, each
// naming at least one agent, and/or labels), matching at least one agent.
// Refused before anything is stored.
std::variant<std::vector<Agent>, HttpReply> ControlPlane::select_agents(const nlohmann::json& j, const Principal& p) {
  if (j.contains("agent_id") == j.contains("selector"))
    return ApiError{400, "agent_id", "give agent_id or selector (one of them)"}.reply();
  if (j.contains("agent_id")) {
    const int64_t agent_id = j["agent_id"].get<int64_t>();
    auto agent = store_.agent(p.workspace_id, agent_id);
    if (!agent) return storage_error(agent.error());
    if (!agent->has_value()) return api_error(404, "agent_id: no such agent", "agent_id");
    return std::vector<Agent>{**agent};
  }
  auto parsed = parse_selector(j["selector"], "selector");
  if (auto* e = std::get_if<ApiError>(&parsed)) return e->reply();
  const auto& sel = std::get<AgentSelector>(parsed);
  auto all = store_.agents(p.workspace_id);
  if (!all) return storage_error(all.error());
  if (sel.all) {
    if (all->empty()) return api_error(404, "selector: the workspace has no agents", "selector");
    return std::move(*all);
  }
  // Each hostname must name an agent (a typo is not silently skipped).
  for (size_t i = 0; i < sel.hostnames.size(); ++i)
    if (std::none_of(all->begin(), all->end(), [&](const Agent& a) { return a.hostname == sel.hostnames[i]; })) {
      const std::string field = "selector.hostnames[" + std::to_string(i) + "]";
      return api_error(404, field + ": no agent named '" + sel.hostnames[i] + "'", field);
    }
  std::vector<Agent> chosen;
  for (const auto& a : *all)
    if (sel.matches(a)) chosen.push_back(a);
  if (chosen.empty())
    return api_error(404, "selector: no agent of the workspace matches",
                     sel.labels.empty() ? "selector" : "selector.labels");
  return chosen;
}

// One experiment per selected agent, all or none (one transaction with their
// audit entries). {"agent_id": N} answers the experiment; a selector answers
// {"experiments": [...]}.
HttpReply ControlPlane::create_experiment(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kCreateFields)) return e->reply();
  if (auto e = check_experiment_spec(j["spec"])) return e->reply();
  auto selected = select_agents(j, p);
  if (auto* r = std::get_if<HttpReply>(&selected)) return *r;
  const std::string field = j.contains("agent_id") ? "agent_id" : "selector";
  std::vector<PlannedExperiment> plans;
  for (const auto& a : std::get<std::vector<Agent>>(selected)) {
    nlohmann::json detail{{"agent_id", a.id}, {"spec", j["spec"]}};
    if (j.contains("selector")) detail["selector"] = j["selector"];
    plans.push_back({a, j["spec"], std::move(detail)});
  }
  auto created = start_experiments(p, plans, field);
  if (auto* r = std::get_if<HttpReply>(&created)) return *r;
  const auto& list = std::get<nlohmann::json>(created);
  if (j.contains("agent_id") && list.size() == 1) return api_json(201, list[0]);
  return api_json(201, {{"experiments", list}});
}

// The planned experiments, all or none (one transaction with their audit
// entries, each with its plan's detail, and `also`'s), their agents woken:
// refused (409, naming `field`) when a kill switch is engaged. The
// experiments as they are now.
std::variant<nlohmann::json, HttpReply> ControlPlane::start_experiments(const Principal& p,
                                                                        const std::vector<PlannedExperiment>& plans,
                                                                        const std::string& field,
                                                                        const std::optional<ExtraAudit>& also) {
  auto ws = store_.workspace(p.workspace_id);
  if (!ws) return storage_error(ws.error());
  if (ws->has_value() && (*ws)->killed)
    return api_error(409, "the workspace's kill switch is engaged: nothing starts until DELETE /v1/kill");
  for (const auto& plan : plans)
    if (plan.agent.killed)
      return api_error(
          409,
          field + ": the kill switch of agent " + std::to_string(plan.agent.id) + " (" + plan.agent.hostname +
              ") is engaged: nothing starts on it until DELETE /v1/kill?agent_id=" + std::to_string(plan.agent.id),
          field);
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  if (also)
    if (auto logged = audit(p, also->action, also->object, also->detail); !logged) return storage_error(logged.error());
  std::vector<int64_t> ids;
  for (const auto& plan : plans) {
    auto e = store_.insert_experiment(p.workspace_id, plan.agent.id, plan.spec.dump(), now_ms());
    if (!e) return storage_error(e.error());
    if (auto logged = audit(p, "experiment.create", "experiment:" + std::to_string(e->id), plan.detail); !logged)
      return storage_error(logged.error());
    ids.push_back(e->id);
  }
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  std::set<int64_t> woken;
  for (const auto& plan : plans) woken.insert(plan.agent.id);
  wake_agents(p.workspace_id, woken);
  nlohmann::json created = nlohmann::json::array();
  for (int64_t id : ids) {
    auto now = store_.experiment(p.workspace_id, id);  // the wake may have dispatched it already
    if (now.ok() && now->has_value()) created.push_back(experiment_json(**now));
  }
  return created;
}

HttpReply ControlPlane::list_experiments(const HttpRequest& req, const Principal& p) {
  int64_t limit = 100;
  if (auto l = req.query_param("limit")) {
    if (l->empty() || l->size() > 4 || l->find_first_not_of("0123456789") != std::string::npos || std::stoll(*l) < 1 ||
        std::stoll(*l) > kMaxList)
      return api_error(400, "limit: must be 1-1000", "limit");
    limit = std::stoll(*l);
  }
  auto rows = store_.experiments(p.workspace_id, limit);
  if (!rows) return api_error(500, "storage: " + rows.error().describe());
  // Written as text, no DOM: this is the listing's hot path.
  std::string body = "{\"experiments\":[";
  body.reserve(rows->size() * 320 + 20);
  for (size_t i = 0; i < rows->size(); ++i) {
    if (i) body += ',';
    append_experiment_json(body, (*rows)[i]);
  }
  body += "]}";
  return HttpReply::json(200, std::move(body));
}

HttpReply ControlPlane::get_experiment(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such experiment");
  auto e = store_.experiment(p.workspace_id, *id);
  if (!e) return api_error(500, "storage: " + e.error().describe());
  if (!e->has_value()) return api_error(404, "no such experiment");
  return api_json(200, experiment_json(**e));
}

HttpReply ControlPlane::abort_experiment(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such experiment");
  auto e = store_.experiment(p.workspace_id, *id);
  if (!e) return api_error(500, "storage: " + e.error().describe());
  if (!e->has_value()) return api_error(404, "no such experiment");
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto moved = store_.transition(p.workspace_id, *id, {"queued", "dispatched", "running"}, "cancelled",
                                 "aborted by " + p.actor(), std::nullopt, now_ms());
  if (!moved) return storage_error(moved.error());
  if (!moved->has_value())
    return api_error(409, "experiment " + std::to_string(*id) + " is " + (*e)->state + ": nothing to abort");
  if (auto a = audit(p, "experiment.abort", "experiment:" + std::to_string(*id), {{"was", (*e)->state}}); !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  wake_agent(p.workspace_id, (*moved)->agent_id);
  fire_experiment_webhook(**moved, "experiment.abort", p.actor());
  return api_json(200, experiment_json(**moved));
}

// "?agent_id=N": the kill switch of that agent alone; none: the workspace's.
// Unknown (or another workspace's) agent: 404.
std::variant<std::optional<int64_t>, HttpReply> ControlPlane::kill_target(const HttpRequest& req, const Principal& p) {
  auto q = req.query_param("agent_id");
  if (!q) return std::optional<int64_t>{};
  PathParams as_path{{"id", *q}};
  const auto id = path_id(as_path);
  if (!id) return api_error(404, "agent_id: no such agent", "agent_id");
  auto a = store_.agent(p.workspace_id, *id);
  if (!a) return storage_error(a.error());
  if (!a->has_value()) return api_error(404, "agent_id: no such agent", "agent_id");
  return std::optional<int64_t>(*id);
}

HttpReply ControlPlane::engage_kill(const HttpRequest& req, const Principal& p) {
  auto target = kill_target(req, p);
  if (auto* r = std::get_if<HttpReply>(&target)) return *r;
  const auto agent = std::get<std::optional<int64_t>>(target);
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  std::vector<Experiment> cancelled;
  if (agent) {
    auto c = store_.engage_agent_kill(p.workspace_id, *agent, now_ms());
    if (!c) return storage_error(c.error());
    if (!c->has_value()) return api_error(404, "agent_id: no such agent", "agent_id");
    cancelled = std::move(**c);
  } else {
    auto c = store_.engage_kill(p.workspace_id, now_ms());
    if (!c) return storage_error(c.error());
    cancelled = std::move(*c);
  }
  nlohmann::json ids = nlohmann::json::array();
  std::set<int64_t> agents;
  for (const auto& e : cancelled) {
    ids.push_back(e.id);
    agents.insert(e.agent_id);
  }
  const std::string object = agent ? "agent:" + std::to_string(*agent) : "workspace:" + std::to_string(p.workspace_id);
  if (auto a = audit(p, "kill.engage", object, {{"cancelled", ids}}); !a) return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  // Every agent holding a cancelled experiment hears it now, not at its next poll.
  wake_agents(p.workspace_id, agents);
  nlohmann::json out{{"engaged", true}, {"cancelled", ids}};
  if (agent) out["agent_id"] = *agent;
  fire_webhook(p.workspace_id, "kill",
               agent ? "Kill switch engaged on agent " + std::to_string(*agent) : "Kill switch engaged",
               "by " + p.actor() + ": " + std::to_string(cancelled.size()) + " experiment(s) cancelled",
               {{"scope", agent ? "agent" : "workspace"},
                {"agent_id", agent ? nlohmann::json(*agent) : nlohmann::json(nullptr)},
                {"cancelled", ids},
                {"by", p.actor()}});
  return api_json(200, out);
}

HttpReply ControlPlane::release_kill(const HttpRequest& req, const Principal& p) {
  auto target = kill_target(req, p);
  if (auto* r = std::get_if<HttpReply>(&target)) return *r;
  const auto agent = std::get<std::optional<int64_t>>(target);
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  if (agent) {
    auto done = store_.release_agent_kill(p.workspace_id, *agent);
    if (!done) return storage_error(done.error());
  } else if (auto done = store_.release_kill(p.workspace_id); !done) {
    return storage_error(done.error());
  }
  const std::string object = agent ? "agent:" + std::to_string(*agent) : "workspace:" + std::to_string(p.workspace_id);
  if (auto a = audit(p, "kill.release", object); !a) return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  // Experiments queued while engaged may be claimed now.
  if (agent) {
    wake_agent(p.workspace_id, *agent);
  } else if (auto agents = store_.agents(p.workspace_id); agents) {
    std::set<int64_t> woken;
    for (const auto& a : *agents) woken.insert(a.id);
    wake_agents(p.workspace_id, woken);
  }
  nlohmann::json out{{"engaged", false}};
  if (agent) out["agent_id"] = *agent;
  return api_json(200, out);
}

HttpReply ControlPlane::kill_status(const HttpRequest& req, const Principal& p) {
  auto target = kill_target(req, p);
  if (auto* r = std::get_if<HttpReply>(&target)) return *r;
  const auto agent = std::get<std::optional<int64_t>>(target);
  auto ws = store_.workspace(p.workspace_id);
  if (!ws || !ws->has_value()) return api_error(500, "storage: the workspace is gone");
  nlohmann::json j{{"engaged", (*ws)->killed}};
  j["since_ms"] = (*ws)->killed_ms ? nlohmann::json(*(*ws)->killed_ms) : nlohmann::json(nullptr);
  if (agent) {
    auto a = store_.agent(p.workspace_id, *agent);
    if (!a || !a->has_value()) return api_error(500, "storage: the agent is gone");
    j["agent_id"] = *agent;
    j["agent_engaged"] = (*a)->killed;
  }
  return api_json(200, j);
}

}  // namespace faultline::cp
