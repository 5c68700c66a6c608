// Experiments (create, list, show, abort) and the workspace kill switch.
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/api/experiment_spec.h"

namespace faultline::cp {
namespace {

const std::vector<FieldRule> kCreateFields = {{"agent_id", JsonType::Integer, true}, {"spec", JsonType::Object, true}};
constexpr int64_t kMaxList = 1000;

}  // namespace

HttpReply ControlPlane::create_experiment(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kCreateFields)) return e->reply();
  if (auto e = check_experiment_spec(j["spec"])) return e->reply();
  const int64_t agent_id = j["agent_id"].get<int64_t>();
  auto agent = store_.agent(p.workspace_id, agent_id);
  if (!agent) return api_error(500, "storage: " + agent.error().describe());
  if (!agent->has_value()) return api_error(404, "agent_id: no such agent", "agent_id");
  auto ws = store_.workspace(p.workspace_id);
  if (!ws) return api_error(500, "storage: " + ws.error().describe());
  if (ws->has_value() && (*ws)->killed)
    return api_error(409, "the workspace's kill switch is engaged: nothing starts until DELETE /v1/kill");
  if ((*agent)->killed)
    return api_error(409,
                     "agent_id: the agent's kill switch is engaged: nothing starts on it until DELETE "
                     "/v1/kill?agent_id=" +
                         std::to_string(agent_id),
                     "agent_id");
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto e = store_.insert_experiment(p.workspace_id, agent_id, j["spec"].dump(), now_ms());
  if (!e) return storage_error(e.error());
  if (auto a = audit(p, "experiment.create", "experiment:" + std::to_string(e->id),
                     {{"agent_id", agent_id}, {"spec", j["spec"]}});
      !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  wake_agent(p.workspace_id, agent_id);
  auto now = store_.experiment(p.workspace_id, e->id);  // the wake may have dispatched it already
  const Experiment& shown = now.ok() && now->has_value() ? **now : *e;
  auto out = experiment_json(shown);
  return api_json(201, out);
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
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : *rows) list.push_back(experiment_json(e));
  return api_json(200, {{"experiments", list}});
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
  for (int64_t a : agents) wake_agent(p.workspace_id, a);
  nlohmann::json out{{"engaged", true}, {"cancelled", ids}};
  if (agent) out["agent_id"] = *agent;
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
    for (const auto& a : *agents) wake_agent(p.workspace_id, a.id);
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
