// The proposer's runs: POST /v1/proposals/run asks the configured proposer
// for one service (its read-only tools answered from this workspace's facts),
// records the run whatever its outcome, and sends a proposal by webhook with
// its rendered experiment. A person approves (the validator re-reads the
// facts, then the experiment is created as POST /v1/experiments creates it)
// or rejects. The proposer holds no faultcp token: nothing it says is applied
// until a person's session approves it, and a shadow run never can be.
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/api/experiment_spec.h"
#include "cp/api/service_facts.h"

namespace faultline::cp {
namespace proposals_detail {

const std::vector<FieldRule> kRunFields = {{"service", JsonType::String, true}};
const std::vector<FieldRule> kRejectFields = {{"reason", JsonType::String}};
constexpr int64_t kMaxProposalList = 1000;
constexpr int64_t kHistoryScan = 1000;  // the newest experiments recent_experiments looks through

// recent_experiments: the workspace's experiments on the service's agents.
class StoreExperimentHistory final : public ExperimentHistory {
 public:
  StoreExperimentHistory(Store& store, int64_t ws) : store_(store), ws_(ws) {}
  Result<nlohmann::json> recent_experiments(const ServiceFacts& s, int64_t days, int64_t now_unix_s) override {
    auto rows = store_.experiments(ws_, kHistoryScan);
    if (!rows) return rows.error();
    const int64_t since_ms = (now_unix_s - days * 86400) * 1000;
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : *rows) {
      if (e.created_ms < since_ms) continue;
      bool ours = false;
      for (const auto& i : s.spec.instances) ours = ours || i.agent == e.agent_id;
      if (!ours) continue;
      auto spec = nlohmann::json::parse(e.spec, nullptr, false);
      out.push_back({{"id", e.id},
                     {"agent", e.agent_id},
                     {"kind", spec.is_object() ? spec.value("kind", "") : ""},
                     {"state", e.state},
                     {"created_ms", e.created_ms}});
    }
    return out;
  }

 private:
  Store& store_;
  int64_t ws_;
};

std::string proposal_state(const ProposerRun& r, ProposerMode mode) {
  if (r.outcome == "proposed") return mode == ProposerMode::Approve ? "awaiting_approval" : "shadow";
  return r.outcome;  // refused, skipped, budget_exhausted, failed
}

nlohmann::json proposal_json(const ProposalRow& row) {
  nlohmann::json run = nlohmann::json::parse(row.run, nullptr, false);
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"id", row.id},
          {"service", row.service},
          {"mode", row.mode},
          {"state", row.state},
          {"code", row.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(row.code)},
          {"approvable", row.state == "awaiting_approval"},
          {"run", run.is_discarded() ? nlohmann::json(nullptr) : run},
          {"created_ms", row.created_ms},
          {"created_by", row.created_by},
          {"decided_ms", opt(row.decided_ms)},
          {"decided_by", opt(row.decided_by)},
          {"decision_reason", opt(row.decision_reason)},
          {"experiment_id", opt(row.experiment_id)}};
}

}  // namespace proposals_detail

using namespace proposals_detail;

HttpReply ControlPlane::run_proposer(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kRunFields)) return e->reply();
  const std::string service = j["service"].get<std::string>();
  if (!valid_service_name(service))
    return api_error(400, "service: must be a service's name (1-63 of a-z 0-9 . _ -)", "service");
  if (!config_.proposer || config_.proposer->mode() == ProposerMode::Off)
    return api_error(409, "the proposer is off: start faultcp with --proposer shadow|approve and a model");
  const ProposerMode mode = config_.proposer->mode();
  services_detail::ServiceStoreFacts facts(store_, p.workspace_id, now_ms(), config_.agent_ready_within.count(),
                                           config_.prometheus.get());
  StoreExperimentHistory history(store_, p.workspace_id);
  const SystemClock host;
  const ProposerRun run = config_.proposer->propose(service, facts, history, config_.clock ? *config_.clock : host);
  const std::string state = proposal_state(run, mode);

  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto row = store_.insert_proposal(p.workspace_id, service, proposer_mode_name(mode), state, run.code,
                                    run.to_json().dump(), now_ms(), p.actor());
  if (!row) return storage_error(row.error());
  const std::string object = "proposal:" + std::to_string(row->id);
  nlohmann::json detail = {{"service", service}, {"mode", proposer_mode_name(mode)}, {"state", state},
                           {"code", run.code},   {"model_calls", run.model_calls},   {"ledger", run.ledger}};
  if (run.proposal && !run.proposal->template_name.empty()) detail["template"] = run.proposal->template_name;
  if (auto a = audit(p, "proposal.run", object, detail); !a) return storage_error(a.error());
  if (run.outcome == "budget_exhausted")
    if (auto a = audit(p, "proposal.budget_exhausted", object, {{"service", service}, {"ledger", run.ledger}}); !a)
      return storage_error(a.error());
  if (auto done = tx.commit(); !done) return storage_error(done.error());

  if (run.outcome == "proposed") {
    const auto& prop = *run.proposal;
    fire_webhook(p.workspace_id, "proposal",
                 "Proposal " + std::to_string(row->id) + " for " + service +
                     (state == "shadow" ? " (shadow)" : ": waiting for approval"),
                 prop.template_name + " on " + service + ": " + prop.reasoning,
                 {{"proposal_id", row->id},
                  {"service", service},
                  {"state", state},
                  {"template", prop.template_name},
                  {"rendered", run.rendered},
                  {"hypothesis", {{"sli", prop.hypothesis_sli}, {"threshold", prop.hypothesis_threshold}}},
                  {"abort_burn_rate_5m", prop.abort_burn_rate_5m},
                  {"reasoning", prop.reasoning}});
  }
  return api_json(201, proposal_json(*row));
}

HttpReply ControlPlane::list_proposals(const HttpRequest& req, const Principal& p) {
  int64_t limit = 100;
  if (auto l = req.query_param("limit")) {
    if (l->empty() || l->size() > 4 || l->find_first_not_of("0123456789") != std::string::npos || std::stoll(*l) < 1 ||
        std::stoll(*l) > kMaxProposalList)
      return api_error(400, "limit: must be 1-1000", "limit");
    limit = std::stoll(*l);
  }
  auto rows = store_.proposals(p.workspace_id, limit);
  if (!rows) return storage_error(rows.error());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : *rows) list.push_back(proposal_json(r));
  return api_json(200, {{"proposals", list}});
}

HttpReply ControlPlane::get_proposal(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such proposal");
  auto row = store_.proposal(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such proposal");
  return api_json(200, proposal_json(**row));
}

HttpReply ControlPlane::decide_proposal(const HttpRequest& req, const PathParams& params, const Principal& p,
                                        bool approve) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such proposal");
  auto body = parse_body(req.body, true);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const nlohmann::json j =
      std::get<nlohmann::json>(body).is_null() ? nlohmann::json::object() : std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, approve ? std::vector<FieldRule>{} : kRejectFields)) return e->reply();
  auto row = store_.proposal(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such proposal");
  const ProposalRow& r = **row;
  if (r.state == "shadow")
    return api_error(409, "proposal " + std::to_string(r.id) + " was recorded in shadow mode: it is never approvable");
  if (r.state != "awaiting_approval")
    return api_error(409, "proposal " + std::to_string(r.id) + " is " + r.state + ", not awaiting_approval");
  const std::string object = "proposal:" + std::to_string(r.id);
  const std::string reason = j.contains("reason") ? j["reason"].get<std::string>() : "";

  if (!approve) {
    SqlTransaction tx(store_.sql());
    if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
    auto moved = store_.decide_proposal(p.workspace_id, r.id, "rejected", now_ms(), p.actor(), reason, std::nullopt);
    if (!moved) return storage_error(moved.error());
    if (!*moved) return api_error(409, "proposal " + std::to_string(r.id) + " was decided meanwhile");
    if (auto a = audit(p, "proposal.reject", object, {{"service", r.service}, {"reason", reason}}); !a)
      return storage_error(a.error());
    if (auto done = tx.commit(); !done) return storage_error(done.error());
    auto now = store_.proposal(p.workspace_id, r.id);
    if (!now || !*now) return storage_error(now ? make_error(0, "the proposal vanished") : now.error());
    return api_json(200, proposal_json(**now));
  }

  // The validator again, on the facts as they are now (not as they were
  // when the model proposed).
  const nlohmann::json run = nlohmann::json::parse(r.run, nullptr, false);
  if (!run.is_object() || !run["rendered"].is_object())
    return api_error(500, "proposal " + std::to_string(r.id) + " as stored has no rendered experiment");
  const nlohmann::json& rendered = run["rendered"];
  const nlohmann::json& params_j = rendered["params"];
  Proposal v{r.service, rendered.value("template", ""), "", params_j.value("duration_s", int64_t{0})};
  if (fault_class(v.fault) == FaultClass::Dependency) v.target = params_j.value("target", "");
  services_detail::ServiceStoreFacts facts(store_, p.workspace_id, now_ms(), config_.agent_ready_within.count(),
                                           config_.prometheus.get());
  const SystemClock host;
  const ValidationVerdict verdict = validate(v, facts, config_.clock ? *config_.clock : host);
  if (!verdict.ok()) {
    nlohmann::json b = verdict.to_json();
    b["error"] = "the validator refuses proposal " + std::to_string(r.id) + " now: " + verdict.refusals[0].code;
    return api_json(409, b);
  }
  const nlohmann::json& spec = rendered["experiment"];
  if (auto e = check_experiment_spec(spec))
    return api_error(500, "the rendered experiment does not check: " + e->message);
  const int64_t agent = rendered["instance"].value("agent", int64_t{0});
  auto a = store_.agent(p.workspace_id, agent);
  if (!a) return storage_error(a.error());
  if (!*a) return api_error(409, "the drawn instance's agent " + std::to_string(agent) + " is gone");

  // Created as POST /v1/experiments creates it: the row, its audit entry,
  // the agent woken; the proposal marked in the same transaction.
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto e = store_.insert_experiment(p.workspace_id, agent, spec.dump(), now_ms());
  if (!e) return storage_error(e.error());
  if (auto l = audit(p, "experiment.create", "experiment:" + std::to_string(e->id),
                     {{"agent_id", agent}, {"spec", spec}, {"proposal", r.id}});
      !l)
    return storage_error(l.error());
  auto moved = store_.decide_proposal(p.workspace_id, r.id, "approved", now_ms(), p.actor(), reason, e->id);
  if (!moved) return storage_error(moved.error());
  if (!*moved) return api_error(409, "proposal " + std::to_string(r.id) + " was decided meanwhile");
  if (auto l = audit(p, "proposal.approve", object, {{"service", r.service}, {"experiment_id", e->id}}); !l)
    return storage_error(l.error());
  if (auto done = tx.commit(); !done) return storage_error(done.error());
  wake_agent(p.workspace_id, agent);
  auto now = store_.proposal(p.workspace_id, r.id);
  if (!now || !*now) return storage_error(now ? make_error(0, "the proposal vanished") : now.error());
  return api_json(200, proposal_json(**now));
}

}  // namespace faultline::cp
