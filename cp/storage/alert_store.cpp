// The guard's alert tables (migration 8): a workspace's settings, each
// trigger's cooldown state, the digest's claim and the digest's counts. The
// same SQL for both backends, workspace in every WHERE.
#include <nlohmann/json.hpp>

#include "cp/storage/store.h"

namespace faultline::cp {
// File-local names are unique in the library: it compiles as unity batches.
namespace alert_store_detail {

int64_t anum(const std::optional<std::string>& v) { return v ? std::stoll(*v) : 0; }
std::string astr(const std::optional<std::string>& v) { return v.value_or(""); }

const char* kAlertCols =
    " url, secret, format, triggers, cooldowns, digest, digest_at, digest_weekday, digest_sent_s, updated_ms, "
    "updated_by ";

// Stored by this file only: a comma list and a JSON object of integers.
GuardAlertSettings alert_settings_row(const SqlRow& r) {
  GuardAlertSettings s;
  s.url = astr(r[0]);
  s.secret = astr(r[1]);
  s.format = astr(r[2]);
  const std::string triggers = astr(r[3]);
  for (size_t at = 0; at < triggers.size();) {
    const size_t comma = std::min(triggers.find(',', at), triggers.size());
    if (comma > at) s.triggers.push_back(triggers.substr(at, comma - at));
    at = comma + 1;
  }
  auto cooldowns = nlohmann::json::parse(astr(r[4]), nullptr, false);
  if (cooldowns.is_object())
    for (const auto& [name, sec] : cooldowns.items())
      if (sec.is_number_integer()) s.cooldowns[name] = sec.get<int64_t>();
  s.digest = astr(r[5]);
  s.digest_at = astr(r[6]);
  s.digest_weekday = astr(r[7]);
  s.digest_sent_s = anum(r[8]);
  s.updated_ms = anum(r[9]);
  s.updated_by = astr(r[10]);
  return s;
}

}  // namespace alert_store_detail

using namespace alert_store_detail;

Result<std::optional<GuardAlertSettings>> Store::guard_alerts(int64_t ws) {
  auto r = db_->query(std::string("SELECT") + kAlertCols + "FROM guard_alerts WHERE workspace_id = $1", {ws});
  if (!r) return r.error();
  if (r->empty()) return std::optional<GuardAlertSettings>{};
  return std::optional<GuardAlertSettings>(alert_settings_row(r->front()));
}

Status Store::put_guard_alerts(int64_t ws, const GuardAlertSettings& s) {
  std::string triggers;
  for (const auto& t : s.triggers) triggers += (triggers.empty() ? "" : ",") + t;
  nlohmann::json cooldowns = nlohmann::json::object();
  for (const auto& [name, sec] : s.cooldowns) cooldowns[name] = sec;
  auto r = db_->query(
      "INSERT INTO guard_alerts (workspace_id, url, secret, format, triggers, cooldowns, digest, digest_at, "
      "digest_weekday, digest_sent_s, updated_ms, updated_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
      "$12) ON CONFLICT (workspace_id) DO UPDATE SET url = excluded.url, secret = excluded.secret, "
      "format = excluded.format, triggers = excluded.triggers, cooldowns = excluded.cooldowns, "
      "digest = excluded.digest, digest_at = excluded.digest_at, digest_weekday = excluded.digest_weekday, "
      "digest_sent_s = excluded.digest_sent_s, updated_ms = excluded.updated_ms, updated_by = excluded.updated_by",
      {ws, s.url, s.secret, s.format, triggers, cooldowns.dump(), s.digest, s.digest_at, s.digest_weekday,
       s.digest_sent_s, s.updated_ms, s.updated_by});
  if (!r) return r.error();
  return {};
}

Result<GuardAlertGate> Store::pass_guard_alert(int64_t ws, const std::string& trigger, int64_t now_ms,
                                               int64_t cooldown_ms) {
  auto r =
      db_->query("SELECT last_sent_ms, suppressed FROM guard_alert_state WHERE workspace_id = $1 AND trigger_name = $2",
                 {ws, trigger});
  if (!r) return r.error();
  GuardAlertGate g;
  if (!r->empty() && cooldown_ms > 0 && now_ms - anum(r->front()[0]) < cooldown_ms) {
    g.suppressed = anum(r->front()[1]) + 1;
    auto up = db_->query("UPDATE guard_alert_state SET suppressed = $3 WHERE workspace_id = $1 AND trigger_name = $2",
                         {ws, trigger, g.suppressed});
    if (!up) return up.error();
    return g;
  }
  g.send = true;
  g.suppressed = r->empty() ? 0 : anum(r->front()[1]);
  auto up = db_->query(
      "INSERT INTO guard_alert_state (workspace_id, trigger_name, last_sent_ms, suppressed) VALUES ($1, $2, $3, 0) "
      "ON CONFLICT (workspace_id, trigger_name) DO UPDATE SET last_sent_ms = excluded.last_sent_ms, suppressed = 0",
      {ws, trigger, now_ms});
  if (!up) return up.error();
  return g;
}

Result<std::vector<std::pair<int64_t, GuardAlertSettings>>> Store::guard_digests() {
  auto r = db_->query(std::string("SELECT workspace_id,") + kAlertCols +
                      "FROM guard_alerts WHERE digest <> 'off' ORDER BY workspace_id");
  if (!r) return r.error();
  std::vector<std::pair<int64_t, GuardAlertSettings>> out;
  for (const auto& row : *r) out.emplace_back(anum(row[0]), alert_settings_row(SqlRow(row.begin() + 1, row.end())));
  return out;
}

Result<bool> Store::claim_guard_digest(int64_t ws, int64_t was_s, int64_t now_s) {
  auto r = db_->query(
      "UPDATE guard_alerts SET digest_sent_s = $3 WHERE workspace_id = $1 AND digest_sent_s = $2 RETURNING "
      "workspace_id",
      {ws, was_s, now_s});
  if (!r) return r.error();
  return !r->empty();
}

Result<std::vector<GuardFindingCount>> Store::guard_finding_counts(int64_t ws, int64_t since_ms, int64_t until_ms) {
  auto r = db_->query(
      "SELECT kind, rule, verdict, identity, COUNT(*) FROM guard_activity WHERE workspace_id = $1 AND at_ms >= $2 "
      "AND at_ms < $3 GROUP BY kind, rule, verdict, identity",
      {ws, since_ms, until_ms});
  if (!r) return r.error();
  std::vector<GuardFindingCount> out;
  for (const auto& row : *r) out.push_back({astr(row[0]), astr(row[1]), astr(row[2]), astr(row[3]), anum(row[4])});
  return out;
}

}  // namespace faultline::cp
