// Schema versions 1..N, written once for both dialects: "{id}" is the
// dialect's auto-increment key. Types are the common ground of SQLite and
// PostgreSQL: BIGINT (milliseconds since the epoch, ids, 0/1 flags) and TEXT
// (hex hashes, JSON documents).
#include "cp/storage/migrations.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace faultline::cp {
namespace {

// The advisory lock key of migrations on PostgreSQL ("fcpmigr" in ASCII).
constexpr int64_t kMigrationLock = 0x6663706d69677200;

const std::vector<std::string>& migrations() {
  static const std::vector<std::string> m = {
      // 1: identity, agents, experiments, the activity log.
      R"sql(
CREATE TABLE workspaces (
  id {id},
  name TEXT NOT NULL UNIQUE,
  created_ms BIGINT NOT NULL,
  killed BIGINT NOT NULL DEFAULT 0,
  killed_ms BIGINT
);
CREATE TABLE users (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  email TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  created_ms BIGINT NOT NULL
);
CREATE TABLE agents (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  hostname TEXT NOT NULL,
  kernel TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  device TEXT NOT NULL,
  version TEXT NOT NULL,
  features TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  last_seen_ms BIGINT NOT NULL
);
CREATE INDEX agents_workspace ON agents(workspace_id);
CREATE TABLE tokens (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  kind TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  hint TEXT NOT NULL,
  name TEXT NOT NULL,
  user_id BIGINT REFERENCES users(id),
  agent_id BIGINT REFERENCES agents(id),
  created_ms BIGINT NOT NULL,
  expires_ms BIGINT,
  revoked_ms BIGINT
);
CREATE INDEX tokens_workspace ON tokens(workspace_id);
CREATE TABLE experiments (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  agent_id BIGINT NOT NULL REFERENCES agents(id),
  spec TEXT NOT NULL,
  state TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT '',
  record TEXT,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  lease_until_ms BIGINT,
  stop_requested BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX experiments_agent_state ON experiments(agent_id, state);
CREATE INDEX experiments_workspace ON experiments(workspace_id, id);
CREATE TABLE audit (
  seq {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  at_ms BIGINT NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  object TEXT NOT NULL,
  detail TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL
);
CREATE INDEX audit_workspace ON audit(workspace_id, seq);
)sql",
      // 2: the kill switch of one agent.
      R"sql(
ALTER TABLE agents ADD COLUMN killed BIGINT NOT NULL DEFAULT 0;
)sql",
      // 3: webhooks: a workspace's outbound hook and inbound alert secret, and
      // the signatures of the alerts taken (a replay is refused on every replica);
      // when an experiment started running (the dashboard's time left).
      R"sql(
ALTER TABLE experiments ADD COLUMN started_ms BIGINT;
CREATE TABLE webhooks (
  workspace_id BIGINT PRIMARY KEY REFERENCES workspaces(id),
  url TEXT NOT NULL,
  secret TEXT NOT NULL,
  alert_secret TEXT NOT NULL,
  triggers TEXT NOT NULL,
  cooldown_sec BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL
);
CREATE TABLE alert_signatures (
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  signature TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  PRIMARY KEY (workspace_id, signature)
);
CREATE INDEX alert_signatures_at ON alert_signatures(at_ms);
)sql",
      // 4: policy distribution: a workspace's policy bundles, one row per
      // version (the newest is the one agents run), and per agent its labels
      // and what it last reported of its policy (the version it runs, the
      // version the report was about, and how that went).
      R"sql(
CREATE TABLE policies (
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  version BIGINT NOT NULL,
  name TEXT NOT NULL,
  policy TEXT NOT NULL,
  selector TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  created_by TEXT NOT NULL,
  PRIMARY KEY (workspace_id, version)
);
ALTER TABLE agents ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
ALTER TABLE agents ADD COLUMN policy_version BIGINT;
ALTER TABLE agents ADD COLUMN policy_reported BIGINT;
ALTER TABLE agents ADD COLUMN policy_status TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN policy_detail TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN policy_reported_ms BIGINT;
)sql",
      // 5: the AI-agent guard: its activity entries as the guard wrote them
      // (one per workspace, identity and seq, with what the chain check made
      // of each), held requests waiting for a person, the workspace's guard
      // section by version, and the proctor's settings.
      R"sql(
CREATE TABLE guard_activity (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  identity TEXT NOT NULL,
  seq BIGINT NOT NULL,
  ts TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  kind TEXT NOT NULL,
  method TEXT NOT NULL,
  host TEXT NOT NULL,
  path TEXT NOT NULL,
  verdict TEXT NOT NULL,
  rule TEXT NOT NULL,
  llm_model TEXT,
  llm_in BIGINT,
  llm_out BIGINT,
  llm_cache BIGINT,
  llm_reasoning BIGINT,
  prev TEXT NOT NULL,
  hash TEXT NOT NULL,
  chain TEXT NOT NULL,
  chain_detail TEXT NOT NULL,
  received_ms BIGINT NOT NULL,
  reporter TEXT NOT NULL,
  UNIQUE (workspace_id, identity, seq)
);
CREATE INDEX guard_activity_recent ON guard_activity(workspace_id, id);
CREATE INDEX guard_activity_time ON guard_activity(workspace_id, at_ms);
CREATE TABLE guard_approvals (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  request_id TEXT NOT NULL,
  identity TEXT NOT NULL,
  method TEXT NOT NULL,
  host TEXT NOT NULL,
  path TEXT NOT NULL,
  rule TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  expires_ms BIGINT NOT NULL,
  posted_by TEXT NOT NULL,
  state TEXT NOT NULL,
  decided_by TEXT NOT NULL DEFAULT '',
  decision_reason TEXT NOT NULL DEFAULT '',
  decided_ms BIGINT,
  UNIQUE (workspace_id, request_id)
);
CREATE INDEX guard_approvals_state ON guard_approvals(workspace_id, state, id);
CREATE TABLE guard_policies (
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  version BIGINT NOT NULL,
  section TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  created_by TEXT NOT NULL,
  PRIMARY KEY (workspace_id, version)
);
CREATE TABLE guard_proctor (
  workspace_id BIGINT PRIMARY KEY REFERENCES workspaces(id),
  enabled BIGINT NOT NULL,
  model TEXT NOT NULL,
  url TEXT NOT NULL,
  api_key TEXT NOT NULL,
  timeout_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  updated_by TEXT NOT NULL
);
)sql",
      // 6: the LLM budget shared by every guard of an identity
      // (--llm-budget-shared): one counter pair per identity and window
      // length, and the reservations still to settle.
      R"sql(
CREATE TABLE guard_budget (
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  identity TEXT NOT NULL,
  window_s BIGINT NOT NULL,
  window_start BIGINT NOT NULL,
  tokens BIGINT NOT NULL,
  requests BIGINT NOT NULL,
  PRIMARY KEY (workspace_id, identity, window_s)
);
CREATE TABLE guard_budget_reservations (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  identity TEXT NOT NULL,
  window_s BIGINT NOT NULL,
  window_start BIGINT NOT NULL,
  tokens BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  reserved_by TEXT NOT NULL
);
CREATE INDEX guard_budget_reservations_window ON guard_budget_reservations(workspace_id, identity, window_s, window_start);
)sql",
      // 7: the orchestration's services (docs/orchestration.md): one row per
      // registered service, its checked spec as canonical JSON; a name once per workspace.
      R"sql(
CREATE TABLE services (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  created_by TEXT NOT NULL,
  UNIQUE (workspace_id, name)
);
)sql",
      // 8: the guard's alerts (docs/control-plane.md): a workspace's settings
      // (cooldowns a JSON object, trigger -> seconds), each trigger's last
      // delivery and the alerts its cooldown held back since, and when the
      // last digest went (the schedule's claim: one replica sends it).
      R"sql(
CREATE TABLE guard_alerts (
  workspace_id BIGINT PRIMARY KEY REFERENCES workspaces(id),
  url TEXT NOT NULL,
  secret TEXT NOT NULL,
  format TEXT NOT NULL,
  triggers TEXT NOT NULL,
  cooldowns TEXT NOT NULL,
  digest TEXT NOT NULL,
  digest_at TEXT NOT NULL,
  digest_weekday TEXT NOT NULL,
  digest_sent_s BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  updated_by TEXT NOT NULL
);
CREATE TABLE guard_alert_state (
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  trigger_name TEXT NOT NULL,
  last_sent_ms BIGINT NOT NULL,
  suppressed BIGINT NOT NULL,
  PRIMARY KEY (workspace_id, trigger_name)
);
)sql",
      // 9: the proposer's runs (docs/orchestration.md#the-proposer): every
      // run recorded, whatever its outcome; a proposal waiting for a person
      // moves once to approved (with its experiment) or rejected.
      R"sql(
CREATE TABLE proposals (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  service TEXT NOT NULL,
  mode TEXT NOT NULL,
  state TEXT NOT NULL,
  code TEXT NOT NULL,
  run TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  created_by TEXT NOT NULL,
  decided_ms BIGINT,
  decided_by TEXT,
  decision_reason TEXT,
  experiment_id BIGINT
);
CREATE INDEX proposals_by_workspace ON proposals(workspace_id, id);
)sql",
      // 10: scenarios (docs/orchestration.md#scenarios-on-faultcp): a stored
      // scenario document, its runs, and each live run's checkpoint. A worker
      // acts on a run only after deleting its checkpoint in the transaction
      // that writes the next one (at most once, on every replica).
      R"sql(
CREATE TABLE scenarios (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  name TEXT NOT NULL,
  doc TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  created_by TEXT NOT NULL,
  UNIQUE (workspace_id, name)
);
CREATE TABLE scenario_runs (
  id {id},
  workspace_id BIGINT NOT NULL REFERENCES workspaces(id),
  scenario_id BIGINT NOT NULL,
  agent_id BIGINT NOT NULL,
  state TEXT NOT NULL,
  code TEXT NOT NULL,
  detail TEXT NOT NULL,
  steps TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  ends_by_ms BIGINT NOT NULL,
  created_by TEXT NOT NULL
);
CREATE INDEX scenario_runs_by_workspace ON scenario_runs(workspace_id, id);
CREATE TABLE scenario_checkpoints (
  run_id BIGINT PRIMARY KEY,
  workspace_id BIGINT NOT NULL,
  step BIGINT NOT NULL,
  started BIGINT NOT NULL,
  experiment_id BIGINT,
  due_ms BIGINT NOT NULL
);
CREATE INDEX scenario_checkpoints_by_due ON scenario_checkpoints(due_ms);
)sql",
      // 11: an activity entry's reason (a WebAssembly plugin's, a dlp-block's
      // types), '' for the entries that have none (every one stored before).
      R"sql(
ALTER TABLE guard_activity ADD COLUMN reason TEXT NOT NULL DEFAULT '';
)sql",
      // 12: schedules (cron in an IANA zone) and their firings, one row per
      // firing (schedule_id, due_ms): a firing is recorded at most once.
      R"sql(
CREATE TABLE schedules (
  id {id},
  workspace_id BIGINT NOT NULL,
  name TEXT NOT NULL,
  cron TEXT NOT NULL,
  timezone TEXT NOT NULL,
  agent_id BIGINT NOT NULL,
  scenario_id BIGINT,
  step TEXT NOT NULL,
  enabled BIGINT NOT NULL,
  next_due_ms BIGINT,
  created_ms BIGINT NOT NULL,
  created_by TEXT NOT NULL
);
CREATE UNIQUE INDEX schedules_by_name ON schedules(workspace_id, name);
CREATE INDEX schedules_by_due ON schedules(next_due_ms);
CREATE TABLE schedule_firings (
  id {id},
  schedule_id BIGINT NOT NULL,
  workspace_id BIGINT NOT NULL,
  due_ms BIGINT NOT NULL,
  fired_ms BIGINT NOT NULL,
  status TEXT NOT NULL,
  code TEXT NOT NULL,
  detail TEXT NOT NULL,
  scenario_run_id BIGINT,
  experiment_id BIGINT,
  missed BIGINT NOT NULL
);
CREATE UNIQUE INDEX schedule_firings_once ON schedule_firings(schedule_id, due_ms);
)sql",
  };
  return m;
}

std::string for_dialect(std::string sql, SqlDialect d) {
  const std::string id = d == SqlDialect::Sqlite ? "INTEGER PRIMARY KEY AUTOINCREMENT"
                                                 : "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY";
  for (size_t at; (at = sql.find("{id}")) != std::string::npos;) sql.replace(at, 4, id);
  return sql;
}

}  // namespace

int64_t latest_schema_version() { return static_cast<int64_t>(migrations().size()); }

Result<int64_t> migrate(SqlConnection& db, int64_t up_to) {
  up_to = std::min(up_to, latest_schema_version());
  FL_TRY(db.exec_script(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_ms BIGINT NOT NULL)"));
  SqlTransaction tx(db);
  FL_TRY(tx.begin(kMigrationLock));
  auto rows = db.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (!rows) return rows.error();
  const int64_t have = std::stoll(rows->at(0).at(0).value_or("0"));
  if (have > latest_schema_version())
    return make_error(0, "the database is at schema version " + std::to_string(have) + ", newer than this faultcp (" +
                             std::to_string(latest_schema_version()) + "): run a newer faultcp");
  for (int64_t v = have + 1; v <= up_to; ++v) {
    auto applied = db.exec_script(for_dialect(migrations()[static_cast<size_t>(v - 1)], db.dialect()));
    if (!applied) return make_error(0, "migration " + std::to_string(v) + ": " + applied.error().describe());
    const int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    auto mark = db.query("INSERT INTO schema_migrations (version, applied_ms) VALUES ($1, $2)", {v, now_ms});
    if (!mark) return mark.error();
  }
  FL_TRY(tx.commit());
  return std::max(have, up_to);
}

}  // namespace faultline::cp
