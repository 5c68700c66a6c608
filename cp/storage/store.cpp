// The store's queries: one SQL text for both backends, workspace in every WHERE.
#include "cp/storage/store.h"

#include <algorithm>

#include "cp/storage/migrations.h"

namespace faultline::cp {
namespace {

// Advisory lock keys (PostgreSQL) of the transactions that must not interleave.
constexpr int64_t kAuditLockBase = 0x6663617500000000;  // + workspace id: one chain per workspace
constexpr int64_t kKillLockBase = 0x66636b6c00000000;
constexpr int64_t kSignupLock = 0x6663736900000000;  // names and emails are unique across workspaces

int64_t num(const std::optional<std::string>& v) { return v ? std::stoll(*v) : 0; }
std::optional<int64_t> opt_num(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  return std::stoll(*v);
}
std::string str(const std::optional<std::string>& v) { return v.value_or(""); }
SqlValue opt_param(const std::optional<int64_t>& v) { return v ? SqlValue(*v) : SqlValue(std::monostate{}); }
SqlValue opt_param(const std::optional<std::string>& v) { return v ? SqlValue(*v) : SqlValue(std::monostate{}); }

const char* kTokenCols = "id, workspace_id, kind, hint, name, user_id, agent_id, created_ms, expires_ms, revoked_ms";
TokenRow token_row(const SqlRow& r) {
  return TokenRow{num(r[0]),     num(r[1]),     str(r[2]), str(r[3]),     str(r[4]),
                  opt_num(r[5]), opt_num(r[6]), num(r[7]), opt_num(r[8]), opt_num(r[9])};
}

const char* kAgentCols =
    "id, workspace_id, hostname, kernel, instance_id, device, version, features, created_ms, last_seen_ms, killed, "
    "labels, policy_version, policy_reported, policy_status, policy_detail, policy_reported_ms";
Agent agent_row(const SqlRow& r) {
  return Agent{num(r[0]),      num(r[1]),      str(r[2]),  str(r[3]),  str(r[4]),       str(r[5]),
               str(r[6]),      str(r[7]),      num(r[8]),  num(r[9]),  num(r[10]) != 0, str(r[11]),
               opt_num(r[12]), opt_num(r[13]), str(r[14]), str(r[15]), opt_num(r[16])};
}

const char* kPolicyCols = "workspace_id, version, name, policy, selector, created_ms, created_by";
PolicyBundle policy_row(const SqlRow& r) {
  return PolicyBundle{num(r[0]), num(r[1]), str(r[2]), str(r[3]), str(r[4]), num(r[5]), str(r[6])};
}

const char* kExperimentCols =
    "id, workspace_id, agent_id, spec, state, detail, record, created_ms, updated_ms, lease_until_ms, stop_requested, "
    "started_ms";
Experiment experiment_row(const SqlRow& r) {
  return Experiment{num(r[0]), num(r[1]), num(r[2]), str(r[3]),     str(r[4]),       str(r[5]),
                    r[6],      num(r[7]), num(r[8]), opt_num(r[9]), num(r[10]) != 0, opt_num(r[11])};
}

const char* kAuditCols = "seq, workspace_id, at_ms, actor, action, object, detail, prev_hash, hash";
AuditEntry audit_row(const SqlRow& r) {
  return AuditEntry{num(r[0]), num(r[1]), num(r[2]), str(r[3]), str(r[4]), str(r[5]), str(r[6]), str(r[7]), str(r[8])};
}

std::string cols(const char* c) { return std::string(" ") + c + " "; }

// "$3, $4, $5" for a state list starting at parameter `first`.
std::string placeholders(size_t first, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (i ? ", $" : "$") + std::to_string(first + i);
  return s;
}

}  // namespace

bool is_final_state(const std::string& s) {
  return s == "completed" || s == "aborted-by-slo" || s == "failed" || s == "cancelled";
}

Result<std::unique_ptr<Store>> Store::open(const std::string& url) {
  auto db = open_database(url);
  if (!db) return db.error();
  auto v = migrate(**db);
  if (!v) return v.error();
  return std::make_unique<Store>(std::move(*db), url);
}

Result<int64_t> Store::schema_version() {
  auto r = db_->query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (!r) return r.error();
  return num(r->at(0).at(0));
}

Result<User> Store::create_workspace(const std::string& workspace, const std::string& email,
                                     const std::string& password_hash, int64_t now_ms) {
  SqlTransaction tx(*db_);
  FL_TRY(tx.begin(kSignupLock));
  auto taken = db_->query(
      "SELECT (SELECT COUNT(*) FROM workspaces WHERE name = $1), "
      "(SELECT COUNT(*) FROM users WHERE email = $2)",
      {workspace, email});
  if (!taken) return taken.error();
  if (num(taken->at(0)[0]) != 0) return input_error(kConflict, "workspace: the name is taken");
  if (num(taken->at(0)[1]) != 0) return input_error(kConflict, "email: an account with this email exists");
  auto ws = db_->query("INSERT INTO workspaces (name, created_ms) VALUES ($1, $2) RETURNING id", {workspace, now_ms});
  if (!ws) return ws.error();
  const int64_t ws_id = num(ws->at(0)[0]);
  auto user = db_->query(
      "INSERT INTO users (workspace_id, email, password_hash, created_ms) VALUES ($1, $2, $3, $4) RETURNING id",
      {ws_id, email, password_hash, now_ms});
  if (!user) return user.error();
  FL_TRY(tx.commit());
  return User{num(user->at(0)[0]), ws_id, email, password_hash};
}

Result<std::optional<User>> Store::user_by_email(const std::string& email) {
  auto r = db_->query("SELECT id, workspace_id, email, password_hash FROM users WHERE email = $1", {email});
  if (!r) return r.error();
  if (r->empty()) return std::optional<User>{};
  const auto& row = r->front();
  return std::optional<User>(User{num(row[0]), num(row[1]), str(row[2]), str(row[3])});
}

Result<std::optional<Workspace>> Store::workspace(int64_t id) {
  auto r = db_->query("SELECT id, name, killed, killed_ms FROM workspaces WHERE id = $1", {id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<Workspace>{};
  const auto& row = r->front();
  return std::optional<Workspace>(Workspace{num(row[0]), str(row[1]), num(row[2]) != 0, opt_num(row[3])});
}

Result<TokenRow> Store::insert_token(int64_t ws, const std::string& kind, const std::string& hash,
                                     const std::string& hint, const std::string& name, std::optional<int64_t> user_id,
                                     std::optional<int64_t> agent_id, int64_t now_ms,
                                     std::optional<int64_t> expires_ms) {
  auto r = db_->query(
      "INSERT INTO tokens (workspace_id, kind, hash, hint, name, user_id, agent_id, created_ms, expires_ms) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING" +
          cols(kTokenCols),
      {ws, kind, hash, hint, name, opt_param(user_id), opt_param(agent_id), now_ms, opt_param(expires_ms)});
  if (!r) return r.error();
  return token_row(r->at(0));
}

Result<std::optional<TokenRow>> Store::token_by_hash(const std::string& hash) {
  auto r = db_->query("SELECT" + cols(kTokenCols) + "FROM tokens WHERE hash = $1", {hash});
  if (!r) return r.error();
  if (r->empty()) return std::optional<TokenRow>{};
  return std::optional<TokenRow>(token_row(r->front()));
}

Result<std::vector<TokenRow>> Store::tokens(int64_t ws) {
  auto r = db_->query("SELECT" + cols(kTokenCols) + "FROM tokens WHERE workspace_id = $1 ORDER BY id", {ws});
  if (!r) return r.error();
  std::vector<TokenRow> out;
  for (const auto& row : *r) out.push_back(token_row(row));
  return out;
}

Result<bool> Store::revoke_token(int64_t ws, int64_t id, int64_t now_ms) {
  auto r = db_->query(
      "UPDATE tokens SET revoked_ms = $3 WHERE workspace_id = $1 AND id = $2 AND revoked_ms IS NULL "
      "RETURNING id",
      {ws, id, now_ms});
  if (!r) return r.error();
  return !r->empty();
}

Result<Agent> Store::insert_agent(int64_t ws, const AgentFacts& f, int64_t now_ms) {
  auto r = db_->query(
      "INSERT INTO agents (workspace_id, hostname, kernel, instance_id, device, version, features, "
      "created_ms, last_seen_ms, labels) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9) RETURNING" +
          cols(kAgentCols),
      {ws, f.hostname, f.kernel, f.instance_id, f.device, f.version, f.features, now_ms, f.labels});
  if (!r) return r.error();
  return agent_row(r->at(0));
}

Result<std::vector<Agent>> Store::agents(int64_t ws) {
  auto r = db_->query("SELECT" + cols(kAgentCols) + "FROM agents WHERE workspace_id = $1 ORDER BY id", {ws});
  if (!r) return r.error();
  std::vector<Agent> out;
  for (const auto& row : *r) out.push_back(agent_row(row));
  return out;
}

Result<std::optional<Agent>> Store::agent(int64_t ws, int64_t id) {
  auto r = db_->query("SELECT" + cols(kAgentCols) + "FROM agents WHERE workspace_id = $1 AND id = $2", {ws, id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<Agent>{};
  return std::optional<Agent>(agent_row(r->front()));
}

Status Store::touch_agent(int64_t ws, int64_t id, int64_t now_ms) {
  auto r = db_->query("UPDATE agents SET last_seen_ms = $3 WHERE workspace_id = $1 AND id = $2", {ws, id, now_ms});
  if (!r) return r.error();
  return {};
}

Result<std::optional<PolicyBundle>> Store::policy(int64_t ws, std::optional<int64_t> version) {
  auto r = version ? db_->query("SELECT" + cols(kPolicyCols) + "FROM policies WHERE workspace_id = $1 AND version = $2",
                                {ws, *version})
                   : db_->query("SELECT" + cols(kPolicyCols) +
                                    "FROM policies WHERE workspace_id = $1 ORDER BY version DESC LIMIT 1",
                                {ws});
  if (!r) return r.error();
  if (r->empty()) return std::optional<PolicyBundle>{};
  return std::optional<PolicyBundle>(policy_row(r->front()));
}

Result<PolicyBundle> Store::insert_policy(int64_t ws, const std::string& name, const std::string& policy,
                                          const std::string& selector, int64_t now_ms, const std::string& created_by) {
  auto r = db_->query(
      "INSERT INTO policies (workspace_id, version, name, policy, selector, created_ms, created_by) "
      "VALUES ($1, (SELECT COALESCE(MAX(version), 0) + 1 FROM policies WHERE workspace_id = $1), $2, $3, $4, $5, $6) "
      "RETURNING" +
          cols(kPolicyCols),
      {ws, name, policy, selector, now_ms, created_by});
  if (!r) return r.error();
  return policy_row(r->at(0));
}

Result<bool> Store::report_policy(int64_t ws, int64_t agent_id, const PolicyReport& rep, int64_t now_ms) {
  auto r = db_->query(
      "UPDATE agents SET policy_reported = $3, policy_version = $4, policy_status = $5, policy_detail = $6, "
      "policy_reported_ms = $7 WHERE workspace_id = $1 AND id = $2 RETURNING id",
      {ws, agent_id, rep.about_version, opt_param(rep.running_version), rep.status, rep.detail, now_ms});
  if (!r) return r.error();
  return !r->empty();
}

Result<Experiment> Store::insert_experiment(int64_t ws, int64_t agent_id, const std::string& spec, int64_t now_ms) {
  auto r = db_->query(
      "INSERT INTO experiments (workspace_id, agent_id, spec, state, created_ms, updated_ms) "
      "VALUES ($1, $2, $3, 'queued', $4, $4) RETURNING" +
          cols(kExperimentCols),
      {ws, agent_id, spec, now_ms});
  if (!r) return r.error();
  return experiment_row(r->at(0));
}

Result<std::vector<Experiment>> Store::experiments(int64_t ws, int64_t limit) {
  auto r = db_->query(
      "SELECT" + cols(kExperimentCols) + "FROM experiments WHERE workspace_id = $1 ORDER BY id DESC LIMIT $2",
      {ws, limit});
  if (!r) return r.error();
  std::vector<Experiment> out;
  for (const auto& row : *r) out.push_back(experiment_row(row));
  return out;
}

Result<std::optional<Experiment>> Store::experiment(int64_t ws, int64_t id) {
  auto r =
      db_->query("SELECT" + cols(kExperimentCols) + "FROM experiments WHERE workspace_id = $1 AND id = $2", {ws, id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<Experiment>{};
  return std::optional<Experiment>(experiment_row(r->front()));
}

Result<std::optional<Experiment>> Store::claim_next(int64_t ws, int64_t agent_id, int64_t now_ms,
                                                    int64_t lease_until_ms) {
  // The state test is repeated in the outer WHERE: under PostgreSQL's READ
  // COMMITTED a concurrent claimer re-checks the row it waited for and skips it.
  auto r = db_->query(
      "UPDATE experiments SET state = 'dispatched', updated_ms = $3, lease_until_ms = $4 "
      "WHERE id = (SELECT e.id FROM experiments e JOIN workspaces w ON w.id = e.workspace_id "
      "            JOIN agents a ON a.id = e.agent_id "
      "            WHERE e.workspace_id = $1 AND e.agent_id = $2 AND e.state = 'queued' AND w.killed = 0 "
      "            AND a.killed = 0 ORDER BY e.id LIMIT 1) "
      "AND workspace_id = $1 AND state = 'queued' RETURNING" +
          cols(kExperimentCols),
      {ws, agent_id, now_ms, lease_until_ms});
  if (!r) return r.error();
  if (r->empty()) return std::optional<Experiment>{};
  return std::optional<Experiment>(experiment_row(r->front()));
}

Result<std::vector<int64_t>> Store::pending_stops(int64_t ws, int64_t agent_id) {
  auto r = db_->query(
      "SELECT id FROM experiments WHERE workspace_id = $1 AND agent_id = $2 AND stop_requested = 1 "
      "ORDER BY id",
      {ws, agent_id});
  if (!r) return r.error();
  std::vector<int64_t> out;
  for (const auto& row : *r) out.push_back(num(row[0]));
  return out;
}

Result<std::map<int64_t, std::vector<int64_t>>> Store::pending_stops_by_agent(int64_t ws) {
  auto r = db_->query(
      "SELECT agent_id, id FROM experiments WHERE workspace_id = $1 AND agent_id IS NOT NULL AND stop_requested = 1 "
      "ORDER BY agent_id, id",
      {ws});
  if (!r) return r.error();
  std::map<int64_t, std::vector<int64_t>> out;
  for (const auto& row : *r) out[num(row[0])].push_back(num(row[1]));
  return out;
}

Result<std::set<int64_t>> Store::killed_agents(int64_t ws) {
  auto r = db_->query("SELECT id FROM agents WHERE workspace_id = $1 AND killed = 1", {ws});
  if (!r) return r.error();
  std::set<int64_t> out;
  for (const auto& row : *r) out.insert(num(row[0]));
  return out;
}

Result<std::optional<Experiment>> Store::transition(int64_t ws, int64_t id, const std::vector<std::string>& from,
                                                    const std::string& to, const std::string& detail,
                                                    const std::optional<std::string>& record, int64_t now_ms) {
  // Cancelling an experiment an agent holds asks that agent to stop it.
  std::vector<SqlValue> params{ws, id, to, detail, opt_param(record), now_ms};
  for (const auto& f : from) params.emplace_back(f);
  auto r = db_->query(
      "UPDATE experiments SET state = $3, detail = $4, record = COALESCE($5, record), updated_ms = $6, "
      "lease_until_ms = CASE WHEN $3 = 'running' THEN lease_until_ms ELSE NULL END, "
      "started_ms = CASE WHEN $3 = 'running' AND state = 'dispatched' THEN $6 ELSE started_ms END, "
      "stop_requested = CASE WHEN $3 = 'cancelled' AND state IN ('dispatched', 'running') THEN 1 ELSE 0 END "
      "WHERE workspace_id = $1 AND id = $2 AND state IN (" +
          placeholders(7, from.size()) + ") RETURNING" + cols(kExperimentCols),
      params);
  if (!r) return r.error();
  if (r->empty()) return std::optional<Experiment>{};
  return std::optional<Experiment>(experiment_row(r->front()));
}

Result<bool> Store::confirm_stop(int64_t ws, int64_t id, const std::optional<std::string>& record, int64_t now_ms) {
  auto r = db_->query(
      "UPDATE experiments SET stop_requested = 0, record = COALESCE($3, record), updated_ms = $4 "
      "WHERE workspace_id = $1 AND id = $2 AND stop_requested = 1 RETURNING id",
      {ws, id, opt_param(record), now_ms});
  if (!r) return r.error();
  return !r->empty();
}

Result<std::vector<Experiment>> Store::engage_kill(int64_t ws, int64_t now_ms) {
  SqlTransaction tx(*db_);
  FL_TRY(tx.begin(kKillLockBase + ws));
  auto w = db_->query("UPDATE workspaces SET killed = 1, killed_ms = $2 WHERE id = $1", {ws, now_ms});
  if (!w) return w.error();
  auto r = db_->query(
      "UPDATE experiments SET detail = 'kill switch', updated_ms = $2, lease_until_ms = NULL, "
      "stop_requested = CASE WHEN state IN ('dispatched', 'running') THEN 1 ELSE 0 END, state = 'cancelled' "
      "WHERE workspace_id = $1 AND state IN ('queued', 'dispatched', 'running') RETURNING" +
          cols(kExperimentCols),
      {ws, now_ms});
  if (!r) return r.error();
  FL_TRY(tx.commit());
  std::vector<Experiment> out;
  for (const auto& row : *r) out.push_back(experiment_row(row));
  return out;
}

Result<std::optional<std::vector<Experiment>>> Store::engage_agent_kill(int64_t ws, int64_t agent_id, int64_t now_ms) {
  SqlTransaction tx(*db_);
  FL_TRY(tx.begin(kKillLockBase + ws));
  auto a = db_->query("UPDATE agents SET killed = 1 WHERE workspace_id = $1 AND id = $2 RETURNING id", {ws, agent_id});
  if (!a) return a.error();
  if (a->empty()) return std::optional<std::vector<Experiment>>{};
  auto r = db_->query(
      "UPDATE experiments SET detail = 'kill switch of the agent', updated_ms = $3, lease_until_ms = NULL, "
      "stop_requested = CASE WHEN state IN ('dispatched', 'running') THEN 1 ELSE 0 END, state = 'cancelled' "
      "WHERE workspace_id = $1 AND agent_id = $2 AND state IN ('queued', 'dispatched', 'running') RETURNING" +
          cols(kExperimentCols),
      {ws, agent_id, now_ms});
  if (!r) return r.error();
  FL_TRY(tx.commit());
  std::vector<Experiment> out;
  for (const auto& row : *r) out.push_back(experiment_row(row));
  return std::optional<std::vector<Experiment>>(std::move(out));
}

Result<bool> Store::release_agent_kill(int64_t ws, int64_t agent_id) {
  auto r = db_->query("UPDATE agents SET killed = 0 WHERE workspace_id = $1 AND id = $2 RETURNING id", {ws, agent_id});
  if (!r) return r.error();
  return !r->empty();
}

Status Store::release_kill(int64_t ws) {
  auto r = db_->query("UPDATE workspaces SET killed = 0, killed_ms = NULL WHERE id = $1", {ws});
  if (!r) return r.error();
  return {};
}

Status Store::begin(SqlTransaction& tx, int64_t ws) { return tx.begin(kAuditLockBase + ws); }

Result<std::vector<Experiment>> Store::expired_leases(int64_t now_ms) {
  auto r = db_->query("SELECT" + cols(kExperimentCols) +
                          "FROM experiments WHERE state = 'dispatched' AND lease_until_ms < $1 ORDER BY id",
                      {now_ms});
  if (!r) return r.error();
  std::vector<Experiment> out;
  for (const auto& row : *r) out.push_back(experiment_row(row));
  return out;
}

Result<std::optional<Experiment>> Store::expire_lease(int64_t ws, int64_t id, int64_t now_ms) {
  auto r = db_->query(
      "UPDATE experiments SET state = 'failed', detail = 'lease expired: the agent never said it "
      "started the experiment', updated_ms = $3, lease_until_ms = NULL "
      "WHERE workspace_id = $1 AND id = $2 AND state = 'dispatched' AND lease_until_ms < $3 RETURNING" +
          cols(kExperimentCols),
      {ws, id, now_ms});
  if (!r) return r.error();
  if (r->empty()) return std::optional<Experiment>{};
  return std::optional<Experiment>(experiment_row(r->front()));
}

Result<AuditEntry> Store::append_audit(int64_t ws, const std::string& actor, const std::string& action,
                                       const std::string& object, const std::string& detail_json, int64_t now_ms) {
  SqlTransaction tx(*db_);
  FL_TRY(tx.begin(kAuditLockBase + ws));
  auto last = db_->query("SELECT hash FROM audit WHERE workspace_id = $1 ORDER BY seq DESC LIMIT 1", {ws});
  if (!last) return last.error();
  AuditEntry e{0, ws, now_ms, actor, action, object, detail_json, last->empty() ? kAuditGenesis : str(last->at(0)[0]),
               ""};
  e.hash = audit_entry_hash(e);
  auto r = db_->query(
      "INSERT INTO audit (workspace_id, at_ms, actor, action, object, detail, prev_hash, hash) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq",
      {ws, now_ms, actor, action, object, detail_json, e.prev_hash, e.hash});
  if (!r) return r.error();
  e.seq = num(r->at(0)[0]);
  FL_TRY(tx.commit());
  return e;
}

Result<std::vector<AuditEntry>> Store::audit(int64_t ws) {
  auto r = db_->query("SELECT" + cols(kAuditCols) + "FROM audit WHERE workspace_id = $1 ORDER BY seq", {ws});
  if (!r) return r.error();
  std::vector<AuditEntry> out;
  for (const auto& row : *r) out.push_back(audit_row(row));
  return out;
}

Result<std::map<std::string, int64_t>> Store::experiments_by_state(int64_t ws) {
  auto r = db_->query("SELECT state, COUNT(*) FROM experiments WHERE workspace_id = $1 GROUP BY state", {ws});
  if (!r) return r.error();
  std::map<std::string, int64_t> out;
  for (const auto& row : *r) out[str(row[0])] = num(row[1]);
  return out;
}

Result<int64_t> Store::agent_count(int64_t ws) {
  auto r = db_->query("SELECT COUNT(*) FROM agents WHERE workspace_id = $1", {ws});
  if (!r) return r.error();
  return num(r->at(0)[0]);
}

// Webhooks. Triggers are kept as one comma-separated column (a handful of
// fixed names, never queried by value).
Result<std::optional<WebhookConfig>> Store::webhook(int64_t ws) {
  auto r = db_->query(
      "SELECT url, secret, alert_secret, triggers, cooldown_sec, updated_ms FROM webhooks WHERE workspace_id = $1",
      {ws});
  if (!r) return r.error();
  if (r->empty()) return std::optional<WebhookConfig>{};
  const auto& row = r->front();
  WebhookConfig c{str(row[0]), str(row[1]), str(row[2]), {}, num(row[4]), num(row[5])};
  const std::string triggers = str(row[3]);
  for (size_t at = 0; at < triggers.size();) {
    const size_t comma = std::min(triggers.find(',', at), triggers.size());
    if (comma > at) c.triggers.push_back(triggers.substr(at, comma - at));
    at = comma + 1;
  }
  return std::optional<WebhookConfig>(std::move(c));
}

Status Store::put_webhook(int64_t ws, const WebhookConfig& c) {
  std::string triggers;
  for (const auto& t : c.triggers) triggers += (triggers.empty() ? "" : ",") + t;
  auto r = db_->query(
      "INSERT INTO webhooks (workspace_id, url, secret, alert_secret, triggers, cooldown_sec, updated_ms) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (workspace_id) DO UPDATE SET url = excluded.url, "
      "secret = excluded.secret, alert_secret = excluded.alert_secret, triggers = excluded.triggers, "
      "cooldown_sec = excluded.cooldown_sec, updated_ms = excluded.updated_ms",
      {ws, c.url, c.secret, c.alert_secret, triggers, c.cooldown_sec, c.updated_ms});
  if (!r) return r.error();
  return {};
}

Result<std::optional<Workspace>> Store::workspace_by_name(const std::string& name) {
  auto r = db_->query("SELECT id, name, killed, killed_ms FROM workspaces WHERE name = $1", {name});
  if (!r) return r.error();
  if (r->empty()) return std::optional<Workspace>{};
  const auto& row = r->front();
  return std::optional<Workspace>(Workspace{num(row[0]), str(row[1]), num(row[2]) != 0, opt_num(row[3])});
}

Result<bool> Store::remember_alert_signature(int64_t ws, const std::string& signature, int64_t now_ms,
                                             int64_t forget_before_ms) {
  auto pruned = db_->query("DELETE FROM alert_signatures WHERE at_ms < $1", {forget_before_ms});
  if (!pruned) return pruned.error();
  auto r = db_->query(
      "INSERT INTO alert_signatures (workspace_id, signature, at_ms) VALUES ($1, $2, $3) "
      "ON CONFLICT (workspace_id, signature) DO NOTHING RETURNING at_ms",
      {ws, signature, now_ms});
  if (!r) return r.error();
  return !r->empty();
}

Result<std::vector<Experiment>> Store::active_experiments(int64_t ws) {
  auto r = db_->query("SELECT" + cols(kExperimentCols) +
                          "FROM experiments WHERE workspace_id = $1 AND state IN ('queued', 'dispatched', 'running') "
                          "ORDER BY id",
                      {ws});
  if (!r) return r.error();
  std::vector<Experiment> out;
  for (const auto& row : *r) out.push_back(experiment_row(row));
  return out;
}

Status Store::notify(const std::string& channel, const std::string& payload) {
  if (db_->dialect() != SqlDialect::Postgres) return {};
  auto r = db_->query("SELECT pg_notify($1, $2)", {channel, payload});
  if (!r) return r.error();
  return {};
}

Status Store::notify(const std::string& channel, const std::vector<std::string>& payloads) {
  if (db_->dialect() != SqlDialect::Postgres || payloads.empty()) return {};
  if (payloads.size() == 1) return notify(channel, payloads.front());
  // One text parameter, the payloads one a line (none holds a newline: a
  // replica's nonce and numbers), split back into one notification each.
  std::string lines;
  for (const auto& p : payloads) {
    if (p.find('\n') != std::string::npos) return make_error(EINVAL, "notify: a payload holds a newline");
    lines += p;
    lines += '\n';
  }
  lines.pop_back();
  auto r = db_->query("SELECT pg_notify($1, p) FROM unnest(string_to_array($2, E'\\n')) AS p", {channel, lines});
  if (!r) return r.error();
  return {};
}

Result<std::unique_ptr<SqlListener>> Store::listen(const std::string& channel) {
  if (db_->dialect() != SqlDialect::Postgres) return std::unique_ptr<SqlListener>{};
  return listen_postgres(url_, channel);
}

}  // namespace faultline::cp
