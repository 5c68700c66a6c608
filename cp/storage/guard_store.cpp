// The guard's tables (migration 5): activity entries and their chain verdicts,
// held requests, the guard section by version, the proctor's settings; and
// the shared LLM budget (migration 6). The same SQL for both backends,
// workspace in every WHERE.
#include <algorithm>

#include "cp/storage/store.h"

namespace faultline::cp {
// File-local names are unique in the library: it compiles as unity batches.
namespace guard_store_detail {

int64_t gnum(const std::optional<std::string>& v) { return v ? std::stoll(*v) : 0; }
std::string gstr(const std::optional<std::string>& v) { return v.value_or(""); }

const char* kActivityCols =
    " id, identity, seq, ts, at_ms, kind, method, host, path, verdict, rule, llm_model, llm_in, llm_out, llm_cache, "
    "llm_reasoning, prev, hash, chain, chain_detail, received_ms, reporter, reason ";
GuardActivityRow guard_activity_row(const SqlRow& r) {
  GuardActivityRow row;
  row.id = gnum(r[0]);
  ActivityEntry& e = row.entry;
  e.identity = gstr(r[1]);
  e.seq = static_cast<uint64_t>(gnum(r[2]));
  e.ts = gstr(r[3]);
  row.at_ms = gnum(r[4]);
  e.kind = gstr(r[5]);
  e.method = gstr(r[6]);
  e.host = gstr(r[7]);
  e.path = gstr(r[8]);
  e.verdict = gstr(r[9]);
  e.rule = gstr(r[10]);
  if (r[11])
    e.llm = ActivityLlm{*r[11], static_cast<uint64_t>(gnum(r[12])), static_cast<uint64_t>(gnum(r[13])),
                        static_cast<uint64_t>(gnum(r[14])), static_cast<uint64_t>(gnum(r[15]))};
  e.prev = gstr(r[16]);
  e.hash = gstr(r[17]);
  row.chain = gstr(r[18]);
  row.chain_detail = gstr(r[19]);
  row.received_ms = gnum(r[20]);
  row.reporter = gstr(r[21]);
  e.reason = gstr(r[22]);
  return row;
}

const char* kApprovalCols =
    " id, workspace_id, request_id, identity, method, host, path, rule, reason, created_ms, expires_ms, posted_by, "
    "state, decided_by, decision_reason, decided_ms ";
GuardApproval guard_approval_row(const SqlRow& r) {
  GuardApproval a;
  a.id = gnum(r[0]);
  a.workspace_id = gnum(r[1]);
  a.request_id = gstr(r[2]);
  a.identity = gstr(r[3]);
  a.method = gstr(r[4]);
  a.host = gstr(r[5]);
  a.path = gstr(r[6]);
  a.rule = gstr(r[7]);
  a.reason = gstr(r[8]);
  a.created_ms = gnum(r[9]);
  a.expires_ms = gnum(r[10]);
  a.posted_by = gstr(r[11]);
  a.state = gstr(r[12]);
  a.decided_by = gstr(r[13]);
  a.decision_reason = gstr(r[14]);
  if (r[15]) a.decided_ms = gnum(r[15]);
  return a;
}

// Token counts are unsigned in the log and BIGINT here: a count past INT64_MAX
// (never billed) is clamped rather than wrapped negative.
SqlValue guard_token_count(uint64_t n) {
  return static_cast<int64_t>(std::min<uint64_t>(n, static_cast<uint64_t>(INT64_MAX)));
}

int64_t budget_window_start(int64_t now_ms, int64_t window_s) {
  const int64_t s = now_ms >= 0 ? now_ms / 1000 : -((-now_ms + 999) / 1000);
  const int64_t q = s >= 0 ? s / window_s : -((-s + window_s - 1) / window_s);
  return q * window_s;
}

// The identity's counters for this window length, as they stand in `window`
// (a row of an older window counts as empty).
Result<GuardBudgetCharge> budget_row(SqlConnection& db, int64_t ws, const std::string& identity, int64_t window_s,
                                     int64_t window) {
  auto r = db.query(
      "SELECT window_start, tokens, requests FROM guard_budget WHERE workspace_id = $1 AND identity = $2 AND "
      "window_s = $3",
      {ws, identity, window_s});
  if (!r) return r.error();
  if (r->empty() || gnum(r->front()[0]) != window) return GuardBudgetCharge{window, 0, 0};
  return GuardBudgetCharge{window, gnum(r->front()[1]), gnum(r->front()[2])};
}

Status put_budget_row(SqlConnection& db, int64_t ws, const std::string& identity, int64_t window_s,
                      const GuardBudgetCharge& c) {
  auto r = db.query(
      "INSERT INTO guard_budget (workspace_id, identity, window_s, window_start, tokens, requests) VALUES "
      "($1, $2, $3, $4, $5, $6) ON CONFLICT (workspace_id, identity, window_s) DO UPDATE SET "
      "window_start = excluded.window_start, tokens = excluded.tokens, requests = excluded.requests",
      {ws, identity, window_s, c.window_start, c.tokens, c.requests});
  if (!r) return r.error();
  return {};
}

}  // namespace guard_store_detail

using namespace guard_store_detail;

Result<std::optional<GuardActivityRow>> Store::guard_activity_at(int64_t ws, const std::string& identity, int64_t seq) {
  auto r = db_->query(std::string("SELECT") + kActivityCols +
                          "FROM guard_activity WHERE workspace_id = $1 AND identity = $2 AND seq = $3",
                      {ws, identity, seq});
  if (!r) return r.error();
  if (r->empty()) return std::optional<GuardActivityRow>{};
  return std::optional<GuardActivityRow>(guard_activity_row(r->front()));
}

Result<std::optional<int64_t>> Store::insert_guard_activity(int64_t ws, const GuardActivityRow& row) {
  const ActivityEntry& e = row.entry;
  const SqlValue none = std::monostate{};
  auto r = db_->query(
      "INSERT INTO guard_activity (workspace_id, identity, seq, ts, at_ms, kind, method, host, path, verdict, rule, "
      "llm_model, llm_in, llm_out, llm_cache, llm_reasoning, prev, hash, chain, chain_detail, received_ms, reporter, "
      "reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, "
      "$22, $23) "
      "ON CONFLICT (workspace_id, identity, seq) DO NOTHING RETURNING id",
      {ws,
       e.identity,
       static_cast<int64_t>(e.seq),
       e.ts,
       row.at_ms,
       e.kind,
       e.method,
       e.host,
       e.path,
       e.verdict,
       e.rule,
       e.llm ? SqlValue(e.llm->model) : none,
       e.llm ? guard_token_count(e.llm->in) : none,
       e.llm ? guard_token_count(e.llm->out) : none,
       e.llm ? guard_token_count(e.llm->cache) : none,
       e.llm ? guard_token_count(e.llm->reasoning) : none,
       e.prev,
       e.hash,
       row.chain,
       row.chain_detail,
       row.received_ms,
       row.reporter,
       e.reason});
  if (!r) return r.error();
  if (r->empty()) return std::optional<int64_t>{};
  return std::optional<int64_t>(gnum(r->front()[0]));
}

Status Store::set_guard_activity_chain(int64_t ws, int64_t id, const std::string& chain, const std::string& detail) {
  auto r = db_->query("UPDATE guard_activity SET chain = $3, chain_detail = $4 WHERE workspace_id = $1 AND id = $2",
                      {ws, id, chain, detail});
  if (!r) return r.error();
  return {};
}

Result<std::vector<GuardActivityRow>> Store::guard_activity(int64_t ws, const GuardActivityFilter& f) {
  std::string sql = std::string("SELECT") + kActivityCols + "FROM guard_activity WHERE workspace_id = $1";
  std::vector<SqlValue> params{ws};
  auto where = [&](const char* clause, SqlValue v) {
    params.push_back(std::move(v));
    sql += std::string(" AND ") + clause + " $" + std::to_string(params.size());
  };
  if (f.identity) where("identity =", *f.identity);
  if (f.verdict) where("verdict =", *f.verdict);
  if (f.host) where("host =", *f.host);
  if (f.since_ms) where("at_ms >=", *f.since_ms);
  if (f.until_ms) where("at_ms <", *f.until_ms);
  if (f.before_id) where("id <", *f.before_id);
  params.emplace_back(f.limit);
  sql += " ORDER BY id DESC LIMIT $" + std::to_string(params.size());
  auto r = db_->query(sql, params);
  if (!r) return r.error();
  std::vector<GuardActivityRow> out;
  for (const auto& row : *r) out.push_back(guard_activity_row(row));
  return out;
}

Result<std::vector<GuardIdentitySummary>> Store::guard_activity_summary(int64_t ws, std::optional<int64_t> since_ms,
                                                                        std::optional<int64_t> until_ms) {
  std::string range;
  std::vector<SqlValue> params{ws};
  if (since_ms) {
    params.emplace_back(*since_ms);
    range += " AND at_ms >= $" + std::to_string(params.size());
  }
  if (until_ms) {
    params.emplace_back(*until_ms);
    range += " AND at_ms < $" + std::to_string(params.size());
  }
  auto r = db_->query(
      "SELECT identity, SUM(CASE WHEN kind = 'request' THEN 1 ELSE 0 END), "
      "SUM(CASE WHEN verdict = 'deny' THEN 1 ELSE 0 END), SUM(CASE WHEN verdict = 'approve' THEN 1 ELSE 0 END), "
      "SUM(CASE WHEN llm_model IS NOT NULL THEN 1 ELSE 0 END), COALESCE(SUM(llm_in), 0), COALESCE(SUM(llm_out), 0), "
      "COALESCE(SUM(llm_cache), 0), COALESCE(SUM(llm_reasoning), 0), SUM(CASE WHEN chain <> 'ok' THEN 1 ELSE 0 END), "
      "MAX(seq), MAX(at_ms) FROM guard_activity WHERE workspace_id = $1" +
          range + " GROUP BY identity ORDER BY identity",
      params);
  if (!r) return r.error();
  std::vector<GuardIdentitySummary> out;
  for (const auto& row : *r) {
    GuardIdentitySummary s;
    s.identity = gstr(row[0]);
    s.requests = gnum(row[1]);
    s.denied = gnum(row[2]);
    s.held = gnum(row[3]);
    s.llm_calls = gnum(row[4]);
    s.tokens_in = gnum(row[5]);
    s.tokens_out = gnum(row[6]);
    s.tokens_cache = gnum(row[7]);
    s.tokens_reasoning = gnum(row[8]);
    s.flagged = gnum(row[9]);
    s.last_seq = gnum(row[10]);
    s.last_at_ms = gnum(row[11]);
    out.push_back(std::move(s));
  }
  // Approved: what people decided on the held requests (the activity log
  // records the hold; its outcome is in the approvals).
  std::string approved_range = range;
  for (size_t at; (at = approved_range.find("at_ms")) != std::string::npos;)
    approved_range.replace(at, 5, "created_ms");
  auto a = db_->query("SELECT identity, COUNT(*) FROM guard_approvals WHERE workspace_id = $1 AND state = 'approved'" +
                          approved_range + " GROUP BY identity",
                      params);
  if (!a) return a.error();
  for (const auto& row : *a) {
    const std::string who = gstr(row[0]);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& s) { return s.identity == who; });
    if (it == out.end()) {
      out.push_back(GuardIdentitySummary{.identity = who});
      it = out.end() - 1;
    }
    it->approved = gnum(row[1]);
  }
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.identity < y.identity; });
  return out;
}

Result<std::vector<GuardUsageRow>> Store::guard_usage(int64_t ws, int64_t since_ms) {
  auto r = db_->query(
      "SELECT identity, llm_model, COUNT(*), COALESCE(SUM(llm_in), 0), COALESCE(SUM(llm_out), 0), "
      "COALESCE(SUM(llm_cache), 0), COALESCE(SUM(llm_reasoning), 0) FROM guard_activity "
      "WHERE workspace_id = $1 AND llm_model IS NOT NULL AND at_ms >= $2 "
      "GROUP BY identity, llm_model ORDER BY identity, llm_model",
      {ws, since_ms});
  if (!r) return r.error();
  std::vector<GuardUsageRow> out;
  for (const auto& row : *r)
    out.push_back(GuardUsageRow{gstr(row[0]), gstr(row[1]), gnum(row[2]), gnum(row[3]), gnum(row[4]), gnum(row[5]),
                                gnum(row[6])});
  return out;
}

Result<std::vector<McpToolUseRow>> Store::mcp_tool_use(int64_t ws, int64_t since_ms) {
  auto r = db_->query(
      "SELECT host, path, identity, SUM(CASE WHEN kind = 'mcp' THEN 1 ELSE 0 END), "
      "SUM(CASE WHEN kind = 'mcp' AND verdict = 'deny' THEN 1 ELSE 0 END), "
      "SUM(CASE WHEN kind = 'mcp' AND verdict = 'approve' THEN 1 ELSE 0 END), "
      "SUM(CASE WHEN kind = 'mcp_finding' THEN 1 ELSE 0 END), MAX(at_ms) FROM guard_activity "
      "WHERE workspace_id = $1 AND kind IN ('mcp', 'mcp_finding') AND at_ms >= $2 "
      "GROUP BY host, path, identity ORDER BY host, path, identity",
      {ws, since_ms});
  if (!r) return r.error();
  std::vector<McpToolUseRow> out;
  for (const auto& row : *r)
    out.push_back(McpToolUseRow{gstr(row[0]), gstr(row[1]), gstr(row[2]), gnum(row[3]), gnum(row[4]), gnum(row[5]),
                                gnum(row[6]), gnum(row[7])});
  return out;
}

Result<std::pair<GuardApproval, bool>> Store::insert_guard_approval(int64_t ws, const GuardApproval& a) {
  auto r = db_->query(
      "INSERT INTO guard_approvals (workspace_id, request_id, identity, method, host, path, rule, reason, "
      "created_ms, expires_ms, posted_by, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending') "
      "ON CONFLICT (workspace_id, request_id) DO NOTHING RETURNING" +
          std::string(kApprovalCols),
      {ws, a.request_id, a.identity, a.method, a.host, a.path, a.rule, a.reason, a.created_ms, a.expires_ms,
       a.posted_by});
  if (!r) return r.error();
  if (!r->empty()) return std::make_pair(guard_approval_row(r->front()), true);
  auto old = db_->query(
      std::string("SELECT") + kApprovalCols + "FROM guard_approvals WHERE workspace_id = $1 AND request_id = $2",
      {ws, a.request_id});
  if (!old) return old.error();
  if (old->empty()) return make_error(0, "guard approval " + a.request_id + ": neither inserted nor found");
  return std::make_pair(guard_approval_row(old->front()), false);
}

Result<std::optional<GuardApproval>> Store::guard_approval(int64_t ws, int64_t id) {
  auto r = db_->query(
      std::string("SELECT") + kApprovalCols + "FROM guard_approvals WHERE workspace_id = $1 AND id = $2", {ws, id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<GuardApproval>{};
  return std::optional<GuardApproval>(guard_approval_row(r->front()));
}

Result<std::vector<GuardApproval>> Store::guard_approvals(int64_t ws, int64_t limit, int64_t now_ms) {
  auto r = db_->query(std::string("SELECT") + kApprovalCols +
                          "FROM guard_approvals WHERE workspace_id = $1 "
                          "ORDER BY CASE WHEN state = 'pending' AND expires_ms > $3 THEN 0 ELSE 1 END, id DESC "
                          "LIMIT $2",
                      {ws, limit, now_ms});
  if (!r) return r.error();
  std::vector<GuardApproval> out;
  for (const auto& row : *r) out.push_back(guard_approval_row(row));
  return out;
}

Result<std::optional<GuardApproval>> Store::settle_guard_approval(int64_t ws, int64_t id, const std::string& to,
                                                                  const std::string& by, const std::string& reason,
                                                                  int64_t now_ms) {
  // One conditional UPDATE: two people (or two replicas) deciding at once,
  // or a decision racing the guard's withdrawal, leave exactly one outcome.
  auto r = db_->query(
      "UPDATE guard_approvals SET state = $3, decided_by = $4, decision_reason = $5, decided_ms = $6 "
      "WHERE workspace_id = $1 AND id = $2 AND state = 'pending' AND expires_ms > $6 RETURNING" +
          std::string(kApprovalCols),
      {ws, id, to, by, reason, now_ms});
  if (!r) return r.error();
  if (r->empty()) return std::optional<GuardApproval>{};
  return std::optional<GuardApproval>(guard_approval_row(r->front()));
}

Result<std::optional<GuardPolicyVersion>> Store::guard_policy(int64_t ws, std::optional<int64_t> version) {
  const char* cols = "SELECT version, section, created_ms, created_by FROM guard_policies WHERE workspace_id = $1";
  auto r = version ? db_->query(std::string(cols) + " AND version = $2", {ws, *version})
                   : db_->query(std::string(cols) + " ORDER BY version DESC LIMIT 1", {ws});
  if (!r) return r.error();
  if (r->empty()) return std::optional<GuardPolicyVersion>{};
  const auto& row = r->front();
  return std::optional<GuardPolicyVersion>(GuardPolicyVersion{gnum(row[0]), gstr(row[1]), gnum(row[2]), gstr(row[3])});
}

Result<GuardPolicyVersion> Store::insert_guard_policy(int64_t ws, const std::string& section, int64_t now_ms,
                                                      const std::string& created_by) {
  auto r = db_->query(
      "INSERT INTO guard_policies (workspace_id, version, section, created_ms, created_by) VALUES "
      "($1, (SELECT COALESCE(MAX(version), 0) + 1 FROM guard_policies WHERE workspace_id = $1), $2, $3, $4) "
      "RETURNING version",
      {ws, section, now_ms, created_by});
  if (!r) return r.error();
  return GuardPolicyVersion{gnum(r->front()[0]), section, now_ms, created_by};
}

Result<std::optional<GuardProctor>> Store::guard_proctor(int64_t ws) {
  auto r = db_->query(
      "SELECT enabled, model, url, api_key, timeout_ms, updated_ms, updated_by FROM guard_proctor "
      "WHERE workspace_id = $1",
      {ws});
  if (!r) return r.error();
  if (r->empty()) return std::optional<GuardProctor>{};
  const auto& row = r->front();
  return std::optional<GuardProctor>(GuardProctor{gnum(row[0]) != 0, gstr(row[1]), gstr(row[2]), gstr(row[3]),
                                                  gnum(row[4]), gnum(row[5]), gstr(row[6])});
}

Status Store::put_guard_proctor(int64_t ws, const GuardProctor& p) {
  auto r = db_->query(
      "INSERT INTO guard_proctor (workspace_id, enabled, model, url, api_key, timeout_ms, updated_ms, updated_by) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (workspace_id) DO UPDATE SET enabled = excluded.enabled, "
      "model = excluded.model, url = excluded.url, api_key = excluded.api_key, timeout_ms = excluded.timeout_ms, "
      "updated_ms = excluded.updated_ms, updated_by = excluded.updated_by",
      {ws, int64_t{p.enabled ? 1 : 0}, p.model, p.url, p.api_key, p.timeout_ms, p.updated_ms, p.updated_by});
  if (!r) return r.error();
  return {};
}

Result<GuardBudgetReservation> Store::reserve_guard_budget(int64_t ws, const std::string& identity, int64_t window_s,
                                                           int64_t tokens, std::optional<int64_t> token_limit,
                                                           std::optional<int64_t> request_limit, int64_t now_ms,
                                                           const std::string& by) {
  const int64_t window = budget_window_start(now_ms, window_s);
  // Read, check and write in one transaction holding the workspace's lock:
  // no other reservation of the workspace (another guard, another replica)
  // reads the counters between this one's read and its write.
  SqlTransaction tx(*db_);
  FL_TRY(begin(tx, ws));
  auto c = budget_row(*db_, ws, identity, window_s, window);
  if (!c) return c.error();
  GuardBudgetReservation out;
  out.charge = *c;
  if (request_limit && c->requests + 1 > *request_limit) {
    out.refused = "requests";
    return out;
  }
  if (token_limit && (tokens > *token_limit || c->tokens > *token_limit - tokens)) {
    out.refused = "tokens";
    return out;
  }
  out.charge.tokens += tokens;
  out.charge.requests += 1;
  FL_TRY(put_budget_row(*db_, ws, identity, window_s, out.charge));
  // Reservations of past windows can no longer be settled: forget them.
  auto gone = db_->query(
      "DELETE FROM guard_budget_reservations WHERE workspace_id = $1 AND identity = $2 AND window_s = $3 AND "
      "window_start < $4",
      {ws, identity, window_s, window});
  if (!gone) return gone.error();
  auto id = db_->query(
      "INSERT INTO guard_budget_reservations (workspace_id, identity, window_s, window_start, tokens, created_ms, "
      "reserved_by) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
      {ws, identity, window_s, window, tokens, now_ms, by});
  if (!id) return id.error();
  FL_TRY(tx.commit());
  out.admitted = true;
  out.id = gnum(id->front()[0]);
  return out;
}

Result<bool> Store::end_guard_budget_reservation(int64_t ws, int64_t id, std::optional<int64_t> billed) {
  SqlTransaction tx(*db_);
  FL_TRY(begin(tx, ws));
  // Taken out first: a second settle of the same reservation finds nothing.
  auto r = db_->query(
      "DELETE FROM guard_budget_reservations WHERE workspace_id = $1 AND id = $2 "
      "RETURNING identity, window_s, window_start, tokens",
      {ws, id});
  if (!r) return r.error();
  if (r->empty()) return false;
  const std::string identity = gstr(r->front()[0]);
  const int64_t window_s = gnum(r->front()[1]);
  const int64_t window = gnum(r->front()[2]);
  const int64_t reserved = gnum(r->front()[3]);
  auto row = db_->query(
      "SELECT window_start, tokens, requests FROM guard_budget WHERE workspace_id = $1 AND identity = $2 AND "
      "window_s = $3",
      {ws, identity, window_s});
  if (!row) return row.error();
  if (row->empty() || gnum(row->front()[0]) != window) {
    FL_TRY(tx.commit());  // its window is over: nothing to correct
    return false;
  }
  GuardBudgetCharge n{window, gnum(row->front()[1]), gnum(row->front()[2])};
  n.tokens = (n.tokens >= reserved ? n.tokens - reserved : 0) + billed.value_or(0);
  if (!billed) n.requests = n.requests > 0 ? n.requests - 1 : 0;
  FL_TRY(put_budget_row(*db_, ws, identity, window_s, n));
  FL_TRY(tx.commit());
  return true;
}

Result<GuardBudgetCharge> Store::guard_budget(int64_t ws, const std::string& identity, int64_t window_s,
                                              int64_t now_ms) {
  return budget_row(*db_, ws, identity, window_s, budget_window_start(now_ms, window_s));
}

}  // namespace faultline::cp
