// Scenarios on faultcp: a scenario document stored (read by the CLI's
// reader), run on one agent step by step by whichever replica claims the run's
// checkpoint. A worker deletes the checkpoint, re-reads the run, acts and
// writes the next checkpoint in one transaction: a step's experiment is
// created in that transaction, so a worker killed mid-way leaves the
// checkpoint as it was (nothing created), and a second worker that saw the
// same checkpoint finds nothing to delete and does nothing. Each step runs at
// most once.
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/api/experiment_spec.h"
#include "cp/api/service_facts.h"
#include "userspace/orchestration/scenario.h"

namespace faultline::cp {
namespace scenarios_detail {

const std::vector<FieldRule> kScenarioRunFields = {{"agent_id", JsonType::Integer, true}};
const std::vector<FieldRule> kScenarioTriggerFields = {{"agent_id", JsonType::Integer, true},
                                                       {"reason", JsonType::String}};
constexpr int64_t kMaxScenarioRunList = 1000;

// The 1-based line and column of a byte offset of `text`.
std::pair<int64_t, int64_t> text_position(const std::string& text, size_t byte) {
  int64_t line = 1, column = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// The body as a scenario document, or a 400 naming the line and column of
// malformed JSON (the body is a scenario file) or the field read_scenario()
// refuses.
std::variant<std::pair<Scenario, nlohmann::json>, HttpReply> read_scenario_body(const std::string& body) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's byte is 1-based, at the character that broke the parse.
    const auto [line, column] = text_position(body, e.byte == 0 ? 0 : e.byte - 1);
    HttpReply r = api_error(
        400, "body: line " + std::to_string(line) + ", column " + std::to_string(column) + ": malformed JSON", "body");
    auto j = nlohmann::json::parse(r.body);
    j["line"] = line;
    j["column"] = column;
    return api_json(400, j);
  } catch (const nlohmann::json::exception&) {
    return api_error(400, "body: unreadable JSON: a number out of range", "body");
  }
  auto s = read_scenario(doc);
  if (auto* e = std::get_if<SpecError>(&s)) return api_error(400, e->text(), e->field);
  return std::pair<Scenario, nlohmann::json>{std::get<Scenario>(std::move(s)), std::move(doc)};
}

nlohmann::json scenario_json(const ScenarioRow& row) {
  auto doc = nlohmann::json::parse(row.doc, nullptr, false);
  nlohmann::json j{{"id", row.id},
                   {"name", row.name},
                   {"scenario", doc.is_discarded() ? nlohmann::json::object() : doc},
                   {"created_ms", row.created_ms},
                   {"created_by", row.created_by}};
  if (auto s = read_scenario(doc); auto* sc = std::get_if<Scenario>(&s)) {
    j["steps"] = sc->steps.size();
    j["planned_s"] = sc->planned_s();
  }
  return j;
}

nlohmann::json scenario_run_json(const ScenarioRunRow& r) {
  auto steps = nlohmann::json::parse(r.steps, nullptr, false);
  return {{"id", r.id},
          {"scenario_id", r.scenario_id},
          {"agent_id", r.agent_id},
          {"state", r.state},
          {"code", r.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.code)},
          {"detail", r.detail},
          {"steps", steps.is_array() ? steps : nlohmann::json::array()},
          {"created_ms", r.created_ms},
          {"updated_ms", r.updated_ms},
          {"ends_by_ms", r.ends_by_ms},
          {"created_by", r.created_by}};
}

void finish_run(ScenarioRunRow& run, const std::string& state, const std::string& code, const std::string& detail) {
  run.state = state;
  run.code = code;
  run.detail = detail;
}

// How a step's final experiment state ends the run: none when the run goes on.
// A brake (a guardrail's abort, a cancel) ends it whatever on_failure says.
std::optional<std::pair<std::string, std::string>> step_ending(const std::string& state, bool continue_on_failure) {
  if (state == "completed") return std::nullopt;
  if (state == "aborted-by-slo") return std::pair<std::string, std::string>{"aborted", "guardrail_abort"};
  if (state == "cancelled") return std::pair<std::string, std::string>{"aborted", "cancelled"};
  if (continue_on_failure) return std::nullopt;
  return std::pair<std::string, std::string>{"failed", "step_failed"};
}

}  // namespace scenarios_detail

using namespace scenarios_detail;

HttpReply ControlPlane::create_scenario(const HttpRequest& req, const Principal& p) {
  auto read = read_scenario_body(req.body);
  if (auto* r = std::get_if<HttpReply>(&read)) return *r;
  const auto& [scenario, doc] = std::get<std::pair<Scenario, nlohmann::json>>(read);
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto row = store_.insert_scenario(p.workspace_id, scenario.name, doc.dump(), now_ms(), p.actor());
  if (!row && row.error().err == kConflict) return api_error(409, row.error().message, "name");
  if (!row) return storage_error(row.error());
  if (auto a = audit(p, "scenario.create", "scenario:" + std::to_string(row->id),
                     {{"name", scenario.name}, {"steps", scenario.steps.size()}});
      !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  return api_json(201, scenario_json(*row));
}

HttpReply ControlPlane::list_scenarios(const Principal& p) {
  auto rows = store_.scenarios(p.workspace_id);
  if (!rows) return storage_error(rows.error());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : *rows) out.push_back(scenario_json(r));
  return api_json(200, {{"scenarios", out}});
}

HttpReply ControlPlane::get_scenario(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such scenario");
  auto row = store_.scenario(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such scenario");
  return api_json(200, scenario_json(**row));
}

HttpReply ControlPlane::run_scenario(const HttpRequest& req, const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such scenario");
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kScenarioRunFields)) return e->reply();
  auto row = store_.scenario(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such scenario");
  auto s = read_scenario(nlohmann::json::parse((*row)->doc, nullptr, false));
  if (auto* e = std::get_if<SpecError>(&s))
    return api_error(500, "scenario " + std::to_string(*id) + " as stored does not read back: " + e->text());
  const int64_t agent_id = j["agent_id"].get<int64_t>();
  auto agent = store_.agent(p.workspace_id, agent_id);
  if (!agent) return storage_error(agent.error());
  if (!*agent) return api_error(404, "agent_id: no such agent", "agent_id");
  auto run = start_scenario_run(p.workspace_id, **row, agent_id, p.actor(), {});
  if (auto* r = std::get_if<HttpReply>(&run)) return *r;
  return api_json(201, scenario_run_json(std::get<ScenarioRunRow>(run)));
}

// The run row and its first checkpoint, audited, then the first step at once
// (not at the next tick). `detail` is added to the audit entry (a trigger).
std::variant<ScenarioRunRow, HttpReply> ControlPlane::start_scenario_run(
    int64_t ws, const ScenarioRow& scenario, int64_t agent_id, const std::string& by, const nlohmann::json& detail,
    const std::function<std::optional<HttpReply>()>& in_tx) {
  auto s = std::get<Scenario>(read_scenario(nlohmann::json::parse(scenario.doc, nullptr, false)));
  const int64_t now = now_ms();
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, ws); !begun) return storage_error(begun.error());
  if (in_tx)
    if (auto refused = in_tx()) return *refused;
  auto run = store_.insert_scenario_run(ws, scenario.id, agent_id, now, now + s.max_duration_s * 1000, by);
  if (!run) return storage_error(run.error());
  nlohmann::json audited{{"scenario_id", scenario.id}, {"name", scenario.name}, {"agent_id", agent_id}};
  if (detail.is_object()) audited.update(detail);
  if (auto a = audit_as(ws, by, "scenario.run", "scenario_run:" + std::to_string(run->id), audited); !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  advance_scenario_run(ws, run->id);
  auto now_row = store_.scenario_run(ws, run->id);
  if (!now_row || !*now_row) return storage_error(now_row ? make_error(0, "the run vanished") : now_row.error());
  return **now_row;
}

// A deploy pipeline's hook: signed as /webhooks/alert is (the workspace's
// alert_secret, X-Faultline-Timestamp within the window, X-Faultline-Signature),
// its signature recorded in the run's transaction: a replay, or the same
// delivery sent twice, is refused 409 and starts nothing.
HttpReply ControlPlane::trigger_scenario(const HttpRequest& req, const PathParams& params) {
  auto verified = verify_signed_hook(req, "trigger", "/webhooks/trigger/{id}");
  if (auto* r = std::get_if<HttpReply>(&verified)) return *r;
  const SignedHook& hook = std::get<SignedHook>(verified);
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such scenario");
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kScenarioTriggerFields)) return e->reply();
  auto row = store_.scenario(hook.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such scenario");
  if (!std::holds_alternative<Scenario>(read_scenario(nlohmann::json::parse((*row)->doc, nullptr, false))))
    return api_error(500, "scenario " + std::to_string(*id) + " as stored does not read back");
  const int64_t agent_id = j["agent_id"].get<int64_t>();
  auto agent = store_.agent(hook.workspace_id, agent_id);
  if (!agent) return storage_error(agent.error());
  if (!*agent) return api_error(404, "agent_id: no such agent", "agent_id");
  const std::string replay = "a replay: this delivery started a run already";
  auto run =
      start_scenario_run(hook.workspace_id, **row, agent_id, hook.actor,
                         {{"trigger", true}, {"reason", j.value("reason", "")}}, [&]() -> std::optional<HttpReply> {
                           auto fresh = first_delivery(hook);
                           if (!fresh) return storage_error(fresh.error());
                           if (*fresh) return std::nullopt;
                           return api_error(409, "X-Faultline-Signature: " + replay, "X-Faultline-Signature");
                         });
  if (auto* r = std::get_if<HttpReply>(&run)) {
    if (r->status == 409) (void)refuse_signed_hook(hook, "trigger", "X-Faultline-Signature", replay);
    return *r;
  }
  return api_json(201, scenario_run_json(std::get<ScenarioRunRow>(run)));
}

HttpReply ControlPlane::list_scenario_runs(const Principal& p) {
  auto rows = store_.scenario_runs(p.workspace_id, kMaxScenarioRunList);
  if (!rows) return storage_error(rows.error());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : *rows) out.push_back(scenario_run_json(r));
  return api_json(200, {{"runs", out}});
}

HttpReply ControlPlane::get_scenario_run(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such scenario run");
  auto row = store_.scenario_run(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such scenario run");
  return api_json(200, scenario_run_json(**row));
}

// Claims the checkpoint whatever its due time: no worker acts on the run after
// this commits. The step's experiment, if one is out, is cancelled.
HttpReply ControlPlane::abort_scenario_run(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such scenario run");
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto c = store_.claim_scenario_checkpoint(p.workspace_id, *id, INT64_MAX);
  if (!c) return storage_error(c.error());
  auto row = store_.scenario_run(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such scenario run");
  ScenarioRunRow run = **row;
  if (run.state != "running" || !*c)
    return api_error(409, "scenario run " + std::to_string(*id) + " is " + run.state + ": nothing to abort");
  std::optional<int64_t> cancelled;
  if ((*c)->experiment_id) {
    auto moved = store_.transition(p.workspace_id, *(*c)->experiment_id, {"queued", "dispatched", "running"},
                                   "cancelled", "scenario run aborted by " + p.actor(), std::nullopt, now_ms());
    if (!moved) return storage_error(moved.error());
    if (*moved) cancelled = (*moved)->id;
  }
  finish_run(run, "aborted", "aborted", "aborted by " + p.actor() + " at step " + std::to_string((*c)->step + 1));
  if (auto u = store_.update_scenario_run(p.workspace_id, run, now_ms()); !u) return storage_error(u.error());
  if (auto a = audit(p, "scenario_run.abort", "scenario_run:" + std::to_string(run.id),
                     {{"step", (*c)->step}, {"cancelled", cancelled ? nlohmann::json(*cancelled) : nullptr}});
      !a)
    return storage_error(a.error());
  if (auto done = tx.commit(); !done) return storage_error(done.error());
  if (cancelled) wake_agent(p.workspace_id, run.agent_id);
  auto now_row = store_.scenario_run(p.workspace_id, run.id);
  if (!now_row || !*now_row) return storage_error(now_row ? make_error(0, "the run vanished") : now_row.error());
  return api_json(200, scenario_run_json(**now_row));
}

// The worker: every due checkpoint, each claimed on its own.
void ControlPlane::advance_scenarios() {
  auto due = store_.due_scenario_checkpoints(now_ms());
  if (!due) std::fprintf(stderr, "faultcp: scenarios: %s\n", due.error().describe().c_str());
  for (const auto& c : due.value_or({})) advance_scenario_run(c.workspace_id, c.run_id);
  server_.after(config_.scenario_tick, [this] { advance_scenarios(); });
}

void ControlPlane::advance_scenario_run(int64_t ws, int64_t run_id) {
  std::optional<int64_t> woken;
  SqlTransaction tx(store_.sql());
  Status done = store_.begin(tx, ws);
  if (done) {
    auto c = store_.claim_scenario_checkpoint(ws, run_id, now_ms());
    if (!c) done = c.error();
    if (c && !*c) return;  // another worker took it, or the run was aborted
    if (done) done = step_scenario_run(**c, woken);
  }
  if (done) done = tx.commit();
  if (!done) {
    // Rolled back: the checkpoint is there again, for the next tick.
    std::fprintf(stderr, "faultcp: scenario run %lld: %s\n", static_cast<long long>(run_id),
                 done.error().describe().c_str());
    return;
  }
  if (woken) wake_agent(ws, *woken);
}

// Inside the claim's transaction: re-reads the run, then settles the step the
// checkpoint is at and starts the next, writing the next checkpoint (none
// when the run ends).
Status ControlPlane::step_scenario_run(const ScenarioCheckpoint& c, std::optional<int64_t>& woken) {
  const int64_t ws = c.workspace_id, now = now_ms();
  auto row = store_.scenario_run(ws, c.run_id);
  if (!row) return row.error();
  if (!*row || (*row)->state != "running") return {};
  ScenarioRunRow run = **row;
  auto sc = store_.scenario(ws, run.scenario_id);
  if (!sc) return sc.error();
  const nlohmann::json doc = *sc ? nlohmann::json::parse((*sc)->doc, nullptr, false) : nlohmann::json();
  auto read = read_scenario(doc);
  if (auto* e = std::get_if<SpecError>(&read)) {
    finish_run(run, "failed", "scenario_unreadable", "the stored scenario does not read back: " + e->text());
    return finish_scenario_run(run);
  }
  const Scenario& s = std::get<Scenario>(read);
  nlohmann::json steps = nlohmann::json::parse(run.steps, nullptr, false);
  if (!steps.is_array()) steps = nlohmann::json::array();
  size_t next = static_cast<size_t>(c.step);
  if (now >= run.ends_by_ms) {
    if (c.experiment_id) {
      auto moved = store_.transition(ws, *c.experiment_id, {"queued", "dispatched", "running"}, "cancelled",
                                     "over its scenario's cap", std::nullopt, now);
      if (!moved) return moved.error();
      if (*moved) woken = run.agent_id;
    }
    finish_run(run, "aborted", "over_cap",
               "the scenario's cap of " + std::to_string(s.max_duration_s) + " s was reached at step " +
                   std::to_string(c.step + 1));
    run.steps = steps.dump();
    return finish_scenario_run(run);
  }
  if (c.started) {
    const ScenarioStep& step = s.steps.at(next);
    nlohmann::json result{{"step", step.name}, {"index", c.step}};
    if (c.experiment_id) {
      auto e = store_.experiment(ws, *c.experiment_id);
      if (!e) return e.error();
      const std::string state = *e ? (*e)->state : "failed";
      if (!is_final_state(state)) {
        ScenarioCheckpoint again = c;
        again.due_ms = now + config_.scenario_tick.count();
        return store_.put_scenario_checkpoint(again);
      }
      result["experiment_id"] = *c.experiment_id;
      result["status"] = state;
      steps.push_back(result);
      run.steps = steps.dump();
      if (auto end = step_ending(state, s.continue_on_failure)) {
        finish_run(run, end->first, end->second,
                   "step " + step.name + " ended " + state + (*e ? ": " + (*e)->detail : std::string()));
        return finish_scenario_run(run);
      }
    } else {
      result["wait_s"] = step.wait_s;
      result["status"] = "completed";
      steps.push_back(result);
      run.steps = steps.dump();
    }
    ++next;
  }
  return start_scenario_step(run, s, doc, next, woken);
}

// Starts step `index` (or ends the run after its last step): a wait is a
// checkpoint due when it is over; a fault is validated, then its experiment
// created for the run's agent in this transaction.
Status ControlPlane::start_scenario_step(ScenarioRunRow& run, const Scenario& s, const nlohmann::json& doc,
                                         size_t index, std::optional<int64_t>& woken) {
  const int64_t ws = run.workspace_id, now = now_ms();
  if (index >= s.steps.size()) {
    bool failed = false;
    for (const auto& r : nlohmann::json::parse(run.steps, nullptr, false))
      failed = failed || r.value("status", "") != "completed";
    if (failed)
      finish_run(run, "failed", "step_failed", "a step did not complete (on_failure: continue ran the rest)");
    else
      finish_run(run, "completed", "", "every step completed");
    return finish_scenario_run(run);
  }
  const ScenarioStep& step = s.steps[index];
  ScenarioCheckpoint next{run.id, ws, static_cast<int64_t>(index), true, std::nullopt, now};
  if (step.is_wait()) {
    next.due_ms = now + step.wait_s * 1000;
    FL_TRY(store_.update_scenario_run(ws, run, now));
    return store_.put_scenario_checkpoint(next);
  }
  auto refusal = refuse_scenario_step(run, step, doc["steps"][index]);
  if (!refusal) return refusal.error();
  if (*refusal) {
    nlohmann::json steps = nlohmann::json::parse(run.steps, nullptr, false);
    steps.push_back({{"step", step.name}, {"index", index}, {"status", "refused"}, {"refusals", **refusal}});
    run.steps = steps.dump();
    const auto& first = (**refusal)[0];
    finish_run(run, "refused", first.value("code", ""),
               "step " + step.name + " refused at dispatch: " + first.value("message", ""));
    return finish_scenario_run(run);
  }
  auto e = store_.insert_experiment(ws, run.agent_id, step.spec.dump(), now);
  if (!e) return e.error();
  FL_TRY(audit_as(ws, run.created_by, "experiment.create", "experiment:" + std::to_string(e->id),
                  {{"agent_id", run.agent_id}, {"spec", step.spec}, {"scenario_run", run.id}, {"step", step.name}}));
  next.experiment_id = e->id;
  next.due_ms = now + config_.scenario_tick.count();
  FL_TRY(store_.update_scenario_run(ws, run, now));
  woken = run.agent_id;
  return store_.put_scenario_checkpoint(next);
}

// Why a fault step may not be dispatched now: none when it may. The kill
// switches first; a template step is then judged by the validator on the
// service whose instance it targets (the run's agent, the step's cgroup); an
// experiment step is checked as POST /v1/experiments checks one.
Result<std::optional<nlohmann::json>> ControlPlane::refuse_scenario_step(const ScenarioRunRow& run,
                                                                         const ScenarioStep& step,
                                                                         const nlohmann::json& step_doc) {
  const int64_t ws = run.workspace_id;
  auto refused = [](const std::string& code, const std::string& message) {
    return std::optional<nlohmann::json>(nlohmann::json::array({{{"code", code}, {"message", message}}}));
  };
  auto w = store_.workspace(ws);
  if (!w) return w.error();
  auto a = store_.agent(ws, run.agent_id);
  if (!a) return a.error();
  if ((*w && (*w)->killed) || (*a && (*a)->killed))
    return refused("kill_switch",
                   "a kill switch is engaged (the workspace's or agent " + std::to_string(run.agent_id) + "'s)");
  if (!*a) return refused("fact_unreadable", "agent " + std::to_string(run.agent_id) + " is gone");
  if (!step.tmpl) {
    if (auto e = check_experiment_spec(step.spec)) return refused("bad_experiment", e->field + ": " + e->message);
    return std::optional<nlohmann::json>();
  }
  const std::string cgroup = step_doc.value("cgroup", "");
  services_detail::ServiceStoreFacts facts(store_, ws, now_ms(), config_.agent_ready_within.count(),
                                           config_.prometheus.get());
  auto services = store_.services(ws);
  if (!services) return services.error();
  std::string service;
  for (const auto& row : *services) {
    auto f = facts.facts_of(row);
    if (!f) return f.error();
    for (const auto& i : (*f)->spec.instances)
      if (i.agent == run.agent_id && i.cgroup == cgroup) service = row.name;
  }
  if (service.empty())
    return refused("not_opted_in", "no service of this workspace has the instance agent " +
                                       std::to_string(run.agent_id) + " cgroup " + cgroup);
  Proposal v{service, step.tmpl->name, "", step.params.value("duration_s", int64_t{0})};
  if (fault_class(v.fault) == FaultClass::Dependency) v.target = step.params.value("target", "");
  const SystemClock host;
  const ValidationVerdict verdict = validate(v, facts, config_.clock ? *config_.clock : host);
  if (verdict.ok()) return std::optional<nlohmann::json>();
  return std::optional<nlohmann::json>(verdict.to_json()["refusals"]);
}

Status ControlPlane::finish_scenario_run(const ScenarioRunRow& run) {
  FL_TRY(store_.update_scenario_run(run.workspace_id, run, now_ms()));
  return audit_as(run.workspace_id, "faultcp", "scenario_run.end", "scenario_run:" + std::to_string(run.id),
                  {{"state", run.state}, {"code", run.code}, {"detail", run.detail}});
}

}  // namespace faultline::cp
