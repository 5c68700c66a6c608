// Schedules and their firings (migration 11), the workspace in every WHERE but
// the worker's scan of due schedules. A firing is claimed by moving the
// schedule's next_due_ms on from the value the worker saw: of two workers
// (two replicas) that saw it due, only the one whose UPDATE returned the row
// acts; the firing row's (schedule_id, due_ms) is unique besides.
#include "cp/storage/store.h"

namespace faultline::cp {
namespace {

const char* kScheduleColumns =
    " id, workspace_id, name, cron, timezone, agent_id, scenario_id, step, enabled, next_due_ms, created_ms, "
    "created_by ";
const char* kFiringColumns =
    " id, schedule_id, workspace_id, due_ms, fired_ms, status, code, detail, scenario_run_id, experiment_id, missed ";

int64_t schedule_int(const std::optional<std::string>& v) { return std::stoll(v.value_or("0")); }
std::optional<int64_t> schedule_opt(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  return std::stoll(*v);
}
SqlValue schedule_value(const std::optional<int64_t>& v) { return v ? SqlValue(*v) : SqlValue(std::monostate{}); }

ScheduleRow schedule_from(const SqlRow& r) {
  ScheduleRow s;
  s.id = schedule_int(r[0]);
  s.workspace_id = schedule_int(r[1]);
  s.name = r[2].value_or("");
  s.cron = r[3].value_or("");
  s.timezone = r[4].value_or("");
  s.agent_id = schedule_int(r[5]);
  s.scenario_id = schedule_opt(r[6]);
  s.step = r[7].value_or("");
  s.enabled = schedule_int(r[8]) != 0;
  s.next_due_ms = schedule_opt(r[9]);
  s.created_ms = schedule_int(r[10]);
  s.created_by = r[11].value_or("");
  return s;
}

ScheduleFiringRow firing_from(const SqlRow& r) {
  ScheduleFiringRow f;
  f.id = schedule_int(r[0]);
  f.schedule_id = schedule_int(r[1]);
  f.workspace_id = schedule_int(r[2]);
  f.due_ms = schedule_int(r[3]);
  f.fired_ms = schedule_int(r[4]);
  f.status = r[5].value_or("");
  f.code = r[6].value_or("");
  f.detail = r[7].value_or("");
  f.scenario_run_id = schedule_opt(r[8]);
  f.experiment_id = schedule_opt(r[9]);
  f.missed = schedule_int(r[10]);
  return f;
}

}  // namespace

Result<ScheduleRow> Store::insert_schedule(const ScheduleRow& s) {
  auto taken = db_->query("SELECT id FROM schedules WHERE workspace_id = $1 AND name = $2", {s.workspace_id, s.name});
  if (!taken) return taken.error();
  if (!taken->empty())
    return input_error(kConflict,
                       "name: a schedule named " + s.name + " exists (id " + taken->front()[0].value_or("?") + ")");
  auto r = db_->query(
      "INSERT INTO schedules (workspace_id, name, cron, timezone, agent_id, scenario_id, step, enabled, next_due_ms, "
      "created_ms, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING" +
          std::string(kScheduleColumns),
      {s.workspace_id, s.name, s.cron, s.timezone, s.agent_id, schedule_value(s.scenario_id), s.step,
       int64_t{s.enabled ? 1 : 0}, schedule_value(s.next_due_ms), s.created_ms, s.created_by});
  if (!r) return r.error();
  return schedule_from(r->at(0));
}

Result<std::vector<ScheduleRow>> Store::schedules(int64_t ws) {
  auto r = db_->query("SELECT" + std::string(kScheduleColumns) + "FROM schedules WHERE workspace_id = $1 ORDER BY name",
                      {ws});
  if (!r) return r.error();
  std::vector<ScheduleRow> out;
  for (const auto& row : *r) out.push_back(schedule_from(row));
  return out;
}

Result<std::optional<ScheduleRow>> Store::schedule(int64_t ws, int64_t id) {
  auto r = db_->query("SELECT" + std::string(kScheduleColumns) + "FROM schedules WHERE workspace_id = $1 AND id = $2",
                      {ws, id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<ScheduleRow>();
  return std::optional<ScheduleRow>(schedule_from(r->front()));
}

Status Store::set_schedule_enabled(int64_t ws, int64_t id, bool enabled, std::optional<int64_t> next_due_ms) {
  auto r = db_->query("UPDATE schedules SET enabled = $3, next_due_ms = $4 WHERE workspace_id = $1 AND id = $2",
                      {ws, id, int64_t{enabled ? 1 : 0}, schedule_value(next_due_ms)});
  if (!r) return r.error();
  return {};
}

Result<bool> Store::delete_schedule(int64_t ws, int64_t id) {
  auto r = db_->query("DELETE FROM schedules WHERE workspace_id = $1 AND id = $2 RETURNING id", {ws, id});
  if (!r) return r.error();
  if (r->empty()) return false;
  auto f = db_->query("DELETE FROM schedule_firings WHERE workspace_id = $1 AND schedule_id = $2", {ws, id});
  if (!f) return f.error();
  return true;
}

Result<std::vector<ScheduleRow>> Store::due_schedules(int64_t now_ms) {
  auto r = db_->query("SELECT" + std::string(kScheduleColumns) +
                          "FROM schedules WHERE enabled = 1 AND next_due_ms <= $1 ORDER BY next_due_ms, id",
                      {now_ms});
  if (!r) return r.error();
  std::vector<ScheduleRow> out;
  for (const auto& row : *r) out.push_back(schedule_from(row));
  return out;
}

Result<bool> Store::claim_schedule_firing(int64_t ws, int64_t id, int64_t due_ms, std::optional<int64_t> next_ms) {
  auto r = db_->query(
      "UPDATE schedules SET next_due_ms = $4 WHERE workspace_id = $1 AND id = $2 AND enabled = 1 AND next_due_ms = $3 "
      "RETURNING id",
      {ws, id, due_ms, schedule_value(next_ms)});
  if (!r) return r.error();
  return !r->empty();
}

Result<ScheduleFiringRow> Store::insert_schedule_firing(const ScheduleFiringRow& f) {
  auto r = db_->query(
      "INSERT INTO schedule_firings (schedule_id, workspace_id, due_ms, fired_ms, status, code, detail, "
      "scenario_run_id, experiment_id, missed) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING" +
          std::string(kFiringColumns),
      {f.schedule_id, f.workspace_id, f.due_ms, f.fired_ms, f.status, f.code, f.detail,
       schedule_value(f.scenario_run_id), schedule_value(f.experiment_id), f.missed});
  if (!r) return r.error();
  return firing_from(r->at(0));
}

Status Store::update_schedule_firing(const ScheduleFiringRow& f) {
  auto r =
      db_->query("UPDATE schedule_firings SET status = $3, code = $4, detail = $5 WHERE workspace_id = $1 AND id = $2",
                 {f.workspace_id, f.id, f.status, f.code, f.detail});
  if (!r) return r.error();
  return {};
}

Result<std::vector<ScheduleFiringRow>> Store::schedule_firings(int64_t ws, int64_t schedule_id, int64_t limit) {
  auto r = db_->query("SELECT" + std::string(kFiringColumns) +
                          "FROM schedule_firings WHERE workspace_id = $1 AND schedule_id = $2 ORDER BY due_ms DESC, "
                          "id DESC LIMIT $3",
                      {ws, schedule_id, limit});
  if (!r) return r.error();
  std::vector<ScheduleFiringRow> out;
  for (const auto& row : *r) out.push_back(firing_from(row));
  return out;
}

Result<std::optional<ScheduleFiringRow>> Store::last_started_firing(int64_t ws, int64_t schedule_id) {
  auto r = db_->query("SELECT" + std::string(kFiringColumns) +
                          "FROM schedule_firings WHERE workspace_id = $1 AND schedule_id = $2 AND "
                          "(scenario_run_id IS NOT NULL OR experiment_id IS NOT NULL) ORDER BY due_ms DESC LIMIT 1",
                      {ws, schedule_id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<ScheduleFiringRow>();
  return std::optional<ScheduleFiringRow>(firing_from(r->front()));
}

}  // namespace faultline::cp
