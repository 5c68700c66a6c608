// Scenarios, their runs and the runs' checkpoints (migration 10), the
// workspace in every WHERE but the worker's scan of due checkpoints. A
// checkpoint is claimed by deleting it: of two workers (two replicas) that
// saw it due, only the one whose DELETE returned the row acts.
#include "cp/storage/store.h"

namespace faultline::cp {
namespace {

// File-local names are unique in the library: it compiles as unity batches.
const char* kScenarioColumns = " id, workspace_id, name, doc, created_ms, created_by ";
const char* kScenarioRunColumns =
    " id, workspace_id, scenario_id, agent_id, state, code, detail, steps, created_ms, updated_ms, ends_by_ms, "
    "created_by ";
const char* kCheckpointColumns = " run_id, workspace_id, step, started, experiment_id, due_ms ";

int64_t scenario_int(const std::optional<std::string>& v) { return std::stoll(v.value_or("0")); }

ScenarioRow scenario_from(const SqlRow& r) {
  return ScenarioRow{scenario_int(r[0]), scenario_int(r[1]), r[2].value_or(""),
                     r[3].value_or(""),  scenario_int(r[4]), r[5].value_or("")};
}

ScenarioRunRow scenario_run_from(const SqlRow& r) {
  return ScenarioRunRow{scenario_int(r[0]), scenario_int(r[1]), scenario_int(r[2]),  scenario_int(r[3]),
                        r[4].value_or(""),  r[5].value_or(""),  r[6].value_or(""),   r[7].value_or("[]"),
                        scenario_int(r[8]), scenario_int(r[9]), scenario_int(r[10]), r[11].value_or("")};
}

ScenarioCheckpoint checkpoint_from(const SqlRow& r) {
  ScenarioCheckpoint c{scenario_int(r[0]),      scenario_int(r[1]), scenario_int(r[2]),
                       scenario_int(r[3]) != 0, std::nullopt,       scenario_int(r[5])};
  if (r[4]) c.experiment_id = std::stoll(*r[4]);
  return c;
}

}  // namespace

Result<ScenarioRow> Store::insert_scenario(int64_t ws, const std::string& name, const std::string& doc, int64_t now_ms,
                                           const std::string& by) {
  auto taken = db_->query("SELECT id FROM scenarios WHERE workspace_id = $1 AND name = $2", {ws, name});
  if (!taken) return taken.error();
  if (!taken->empty())
    return input_error(kConflict,
                       "name: a scenario named " + name + " exists (id " + taken->front()[0].value_or("?") + ")");
  auto r = db_->query(
      "INSERT INTO scenarios (workspace_id, name, doc, created_ms, created_by) VALUES ($1, $2, $3, $4, $5) "
      "RETURNING" +
          std::string(kScenarioColumns),
      {ws, name, doc, now_ms, by});
  if (!r) return r.error();
  return scenario_from(r->at(0));
}

Result<std::vector<ScenarioRow>> Store::scenarios(int64_t ws) {
  auto r = db_->query("SELECT" + std::string(kScenarioColumns) + "FROM scenarios WHERE workspace_id = $1 ORDER BY name",
                      {ws});
  if (!r) return r.error();
  std::vector<ScenarioRow> out;
  for (const auto& row : *r) out.push_back(scenario_from(row));
  return out;
}

Result<std::optional<ScenarioRow>> Store::scenario(int64_t ws, int64_t id) {
  auto r = db_->query("SELECT" + std::string(kScenarioColumns) + "FROM scenarios WHERE workspace_id = $1 AND id = $2",
                      {ws, id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<ScenarioRow>();
  return std::optional<ScenarioRow>(scenario_from(r->front()));
}

Result<ScenarioRunRow> Store::insert_scenario_run(int64_t ws, int64_t scenario_id, int64_t agent_id, int64_t now_ms,
                                                  int64_t ends_by_ms, const std::string& by) {
  auto r = db_->query(
      "INSERT INTO scenario_runs (workspace_id, scenario_id, agent_id, state, code, detail, steps, created_ms, "
      "updated_ms, ends_by_ms, created_by) VALUES ($1, $2, $3, 'running', '', '', '[]', $4, $4, $5, $6) RETURNING" +
          std::string(kScenarioRunColumns),
      {ws, scenario_id, agent_id, now_ms, ends_by_ms, by});
  if (!r) return r.error();
  ScenarioRunRow run = scenario_run_from(r->at(0));
  FL_TRY(put_scenario_checkpoint(ScenarioCheckpoint{run.id, ws, 0, false, std::nullopt, now_ms}));
  return run;
}

Result<std::optional<ScenarioRunRow>> Store::scenario_run(int64_t ws, int64_t id) {
  auto r = db_->query(
      "SELECT" + std::string(kScenarioRunColumns) + "FROM scenario_runs WHERE workspace_id = $1 AND id = $2", {ws, id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<ScenarioRunRow>();
  return std::optional<ScenarioRunRow>(scenario_run_from(r->front()));
}

Result<std::vector<ScenarioRunRow>> Store::scenario_runs(int64_t ws, int64_t limit) {
  auto r = db_->query("SELECT" + std::string(kScenarioRunColumns) +
                          "FROM scenario_runs WHERE workspace_id = $1 ORDER BY id DESC LIMIT $2",
                      {ws, limit});
  if (!r) return r.error();
  std::vector<ScenarioRunRow> out;
  for (const auto& row : *r) out.push_back(scenario_run_from(row));
  return out;
}

Status Store::update_scenario_run(int64_t ws, const ScenarioRunRow& run, int64_t now_ms) {
  auto r = db_->query(
      "UPDATE scenario_runs SET state = $3, code = $4, detail = $5, steps = $6, updated_ms = $7 "
      "WHERE workspace_id = $1 AND id = $2",
      {ws, run.id, run.state, run.code, run.detail, run.steps, now_ms});
  if (!r) return r.error();
  return {};
}

Result<std::vector<ScenarioCheckpoint>> Store::due_scenario_checkpoints(int64_t now_ms) {
  auto r = db_->query("SELECT" + std::string(kCheckpointColumns) +
                          "FROM scenario_checkpoints WHERE due_ms <= $1 ORDER BY due_ms, run_id",
                      {now_ms});
  if (!r) return r.error();
  std::vector<ScenarioCheckpoint> out;
  for (const auto& row : *r) out.push_back(checkpoint_from(row));
  return out;
}

Result<std::optional<ScenarioCheckpoint>> Store::claim_scenario_checkpoint(int64_t ws, int64_t run_id,
                                                                           int64_t due_by_ms) {
  auto r = db_->query(
      "DELETE FROM scenario_checkpoints WHERE workspace_id = $1 AND run_id = $2 AND due_ms <= $3 "
      "RETURNING" +
          std::string(kCheckpointColumns),
      {ws, run_id, due_by_ms});
  if (!r) return r.error();
  if (r->empty()) return std::optional<ScenarioCheckpoint>();
  return std::optional<ScenarioCheckpoint>(checkpoint_from(r->front()));
}

Status Store::put_scenario_checkpoint(const ScenarioCheckpoint& c) {
  const SqlValue exp = c.experiment_id ? SqlValue(*c.experiment_id) : SqlValue(std::monostate{});
  auto r = db_->query(
      "INSERT INTO scenario_checkpoints (run_id, workspace_id, step, started, experiment_id, due_ms) "
      "VALUES ($1, $2, $3, $4, $5, $6)",
      {c.run_id, c.workspace_id, c.step, int64_t{c.started ? 1 : 0}, exp, c.due_ms});
  if (!r) return r.error();
  return {};
}

}  // namespace faultline::cp
