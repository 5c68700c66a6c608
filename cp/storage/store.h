// The control plane's storage interface: every read and write faultcp makes,
// over one SqlConnection (SQLite or PostgreSQL; the same SQL for both). Every
// call on a workspace's objects takes the workspace id and matches it in SQL:
// an object of another workspace is "not found", never returned.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "cp/audit/audit_chain.h"
#include "cp/storage/sql_connection.h"
#include "userspace/guard/activity_log.h"

namespace faultline::cp {

// Error.err of a write refused because the name or email is taken.
inline constexpr int kConflict = EEXIST;

struct Workspace {
  int64_t id = 0;
  std::string name;
  bool killed = false;
  std::optional<int64_t> killed_ms;
};

struct User {
  int64_t id = 0;
  int64_t workspace_id = 0;
  std::string email;
  std::string password_hash;
};

struct TokenRow {
  int64_t id = 0;
  int64_t workspace_id = 0;
  std::string kind;  // "session", "api", "enrollment", "agent"
  std::string hint;  // the token's first characters, to tell tokens apart in a list
  std::string name;
  std::optional<int64_t> user_id, agent_id;
  int64_t created_ms = 0;
  std::optional<int64_t> expires_ms;  // none: until revoked
  std::optional<int64_t> revoked_ms;
};

struct Agent {
  int64_t id = 0;
  int64_t workspace_id = 0;
  std::string hostname, kernel, instance_id, device, version;
  std::string features;  // JSON text
  int64_t created_ms = 0;
  int64_t last_seen_ms = 0;
  bool killed = false;  // its own kill switch (the workspace's is apart)
  // Migration 4: the labels it registered with (a JSON object of strings), and
  // its last policy report: the version it runs (none: no policy of the
  // control plane), the version that report was about, "applied", "failed"
  // or "not-selected", and the agent's words (a failure's error).
  std::string labels = "{}";
  std::optional<int64_t> policy_version, policy_reported;
  std::string policy_status, policy_detail;
  std::optional<int64_t> policy_reported_ms;
};

struct AgentFacts {
  std::string hostname, kernel, instance_id, device, version;
  std::string features = "{}";
  std::string labels = "{}";
};

// One version of a workspace's policy bundle (migration 4): the policy file in
// its canonical JSON (policy_json_text) and the selector of the agents that
// run it (JSON text). The newest version is the one agents are given.
struct PolicyBundle {
  int64_t workspace_id = 0;
  int64_t version = 0;
  std::string name;
  std::string policy;
  std::string selector;
  int64_t created_ms = 0;
  std::string created_by;
};

// What an agent says of its policy.
struct PolicyReport {
  int64_t about_version = 0;               // the version it was given
  std::optional<int64_t> running_version;  // the version live on the host now
  std::string status;                      // applied, failed, not-selected
  std::string detail;
};

// States: queued -> dispatched -> running -> completed | aborted-by-slo | failed,
// and cancelled from any state before those (abort, kill switch).
struct Experiment {
  int64_t id = 0;
  int64_t workspace_id = 0;
  int64_t agent_id = 0;
  std::string spec;  // JSON text
  std::string state;
  std::string detail;
  std::optional<std::string> record;  // JSON text the agent reported
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  std::optional<int64_t> lease_until_ms;
  bool stop_requested = false;        // cancelled while on an agent, which has not confirmed the stop
  std::optional<int64_t> started_ms;  // when its agent said "running" (migration 3)
};

[[nodiscard]] bool is_final_state(const std::string& state);

// A workspace's webhooks: where its events are posted (signed with `secret`)
// and the secret inbound alerts are signed with (empty: alerts refused).
struct WebhookConfig {
  std::string url;
  std::string secret;
  std::string alert_secret;
  std::vector<std::string> triggers;
  int64_t cooldown_sec = 0;
  int64_t updated_ms = 0;
};

// One guard activity entry as faultcp keeps it (migration 5): the entry as the
// guard wrote and hashed it, its time in milliseconds, and what the chain
// check made of it: "ok", "gap" (the identity's previous seq has not
// arrived), "bad-prev" (prev is not the previous entry's hash) or "bad-hash"
// (the entry does not hash to its hash). A flagged entry is kept, never dropped.
struct GuardActivityRow {
  int64_t id = 0;
  ActivityEntry entry;
  int64_t at_ms = 0;
  std::string chain = "ok";
  std::string chain_detail;
  int64_t received_ms = 0;
  std::string reporter;  // the actor that posted it ("agent:4", "user:1")
};

// Which activity entries to list: newest first, ids below `before_id`.
struct GuardActivityFilter {
  std::optional<std::string> identity, verdict, host;
  std::optional<int64_t> since_ms, until_ms;  // on the entry's ts
  std::optional<int64_t> before_id;           // the paging cursor
  int64_t limit = 100;
};

struct GuardIdentitySummary {
  std::string identity;
  int64_t requests = 0, denied = 0, held = 0, approved = 0, llm_calls = 0;
  int64_t tokens_in = 0, tokens_out = 0, tokens_cache = 0, tokens_reasoning = 0;
  int64_t flagged = 0;  // entries whose chain check failed
  int64_t last_seq = 0;
  int64_t last_at_ms = 0;
};

struct GuardUsageRow {
  std::string identity, model;
  int64_t calls = 0, tokens_in = 0, tokens_out = 0, tokens_cache = 0, tokens_reasoning = 0;
};

// The MCP guard's calls of one tool of one server by one activity chain
// (kind "mcp": host is the server, path the tool) and its rug-pull findings
// (kind "mcp_finding"), since a time.
struct McpToolUseRow {
  std::string server, tool, identity;
  int64_t calls = 0, denied = 0, held = 0, findings = 0;
  int64_t last_ms = 0;
};

// A request a guard holds until a person decides (migration 5). States:
// pending -> approved | denied (a person), withdrawn (the guard); a pending
// one past expires_ms reads as "expired" and can no longer be decided.
struct GuardApproval {
  int64_t id = 0;
  int64_t workspace_id = 0;
  std::string request_id, identity, method, host, path, rule, reason;
  int64_t created_ms = 0, expires_ms = 0;
  std::string posted_by;
  std::string state = "pending";
  std::string decided_by, decision_reason;
  std::optional<int64_t> decided_ms;
};

// One version of a workspace's guard section (canonical JSON text).
struct GuardPolicyVersion {
  int64_t version = 0;
  std::string section;
  int64_t created_ms = 0;
  std::string created_by;
};

// The proctor's settings; api_key is stored and never shown.
struct GuardProctor {
  bool enabled = false;
  std::string model, url, api_key;
  int64_t timeout_ms = 10'000;
  int64_t updated_ms = 0;
  std::string updated_by;
};

// A workspace's guard alerts (migration 8): where findings are posted
// (signed with `secret`, or as a Slack message), which triggers, each
// trigger's cooldown in seconds, and the digest's schedule (UTC).
struct GuardAlertSettings {
  std::string url, secret;
  std::string format = "auto";  // auto (Slack for hooks.slack.com), faultline, slack
  std::vector<std::string> triggers;
  std::map<std::string, int64_t> cooldowns;  // every trigger of `triggers`
  std::string digest = "off";                // off, daily, weekly
  std::string digest_at = "09:00";           // HH:MM, UTC
  std::string digest_weekday = "monday";     // weekly only
  int64_t digest_sent_s = 0;                 // the last digest, or when the schedule was set
  int64_t updated_ms = 0;
  std::string updated_by;
};

// What a trigger's cooldown made of one more alert: sent (with how many were
// held back since the last one sent) or held back.
struct GuardAlertGate {
  bool send = false;
  int64_t suppressed = 0;  // held back before this one (send), or so far (not)
};

// One line of the digest's counts: findings of an activity (kind, rule,
// verdict) by an identity in the window.
struct GuardFindingCount {
  std::string kind, rule, verdict, identity;
  int64_t count = 0;
};

// The LLM budget shared by every guard of an identity (migration 6): what the
// identity's current window holds (open reservations included), and one
// reservation's answer. Windows are aligned to the epoch, as a guard's own.
struct GuardBudgetCharge {
  int64_t window_start = 0;  // Unix seconds
  int64_t tokens = 0;
  int64_t requests = 0;
};
struct GuardBudgetReservation {
  bool admitted = false;
  std::string refused;       // "requests" or "tokens" when not admitted
  int64_t id = 0;            // admitted: the reservation to settle or release
  GuardBudgetCharge charge;  // after the reservation (refused: as it stands)
};

// A registered service (migration 7): its spec as canonical JSON
// (service_spec_json of userspace/orchestration/service.h).
struct ServiceRow {
  int64_t id = 0;
  int64_t workspace_id = 0;
  std::string name;
  std::string spec;
  int64_t created_ms = 0;
  std::string created_by;
};

// One run of the proposer (migration 9). state: awaiting_approval, shadow,
// refused, skipped, budget_exhausted, failed; a waiting one becomes approved
// or rejected. run: ProposerRun::to_json() as text.
struct ProposalRow {
  int64_t id = 0;
  int64_t workspace_id = 0;
  std::string service;
  std::string mode;
  std::string state;
  std::string code;
  std::string run;
  int64_t created_ms = 0;
  std::string created_by;
  std::optional<int64_t> decided_ms;
  std::optional<std::string> decided_by;
  std::optional<std::string> decision_reason;
  std::optional<int64_t> experiment_id;
};

// A stored scenario (migration 10): the document as posted (canonical JSON
// text), read again by read_scenario() at every step.
struct ScenarioRow {
  int64_t id = 0;
  int64_t workspace_id = 0;
  std::string name;
  std::string doc;
  int64_t created_ms = 0;
  std::string created_by;
};

// One run of a scenario on one agent. state: running, then completed,
// failed, aborted or refused (final); code: the reason of a final state other
// than completed; steps: a JSON array of the steps' results so far.
struct ScenarioRunRow {
  int64_t id = 0;
  int64_t workspace_id = 0;
  int64_t scenario_id = 0;
  int64_t agent_id = 0;
  std::string state;
  std::string code;
  std::string detail;
  std::string steps = "[]";
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t ends_by_ms = 0;  // the scenario's cap from the run's start
  std::string created_by;
};

// A live run's progress: the step it is at, whether that step was started
// (its experiment created, its wait begun), and when a worker should look
// again. Present only while the run has work left; a worker claims it by
// deleting it.
struct ScenarioCheckpoint {
  int64_t run_id = 0;
  int64_t workspace_id = 0;
  int64_t step = 0;
  bool started = false;
  std::optional<int64_t> experiment_id;
  int64_t due_ms = 0;
};

// A schedule (migration 11): a cron expression in an IANA zone firing a
// scenario (scenario_id) or one step (step: a scenario step's JSON, a
// template or an experiment) on one agent. next_due_ms: its next firing, none
// while disabled; a worker claims a firing by moving it on.
struct ScheduleRow {
  int64_t id = 0;
  int64_t workspace_id = 0;
  std::string name;
  std::string cron;
  std::string timezone;
  int64_t agent_id = 0;
  std::optional<int64_t> scenario_id;
  std::string step;  // JSON text; empty for a scenario schedule
  bool enabled = true;
  std::optional<int64_t> next_due_ms;
  int64_t created_ms = 0;
  std::string created_by;
};

// One firing of a schedule: `started` (its scenario run or experiment) or
// `skipped` with a code (overlap, kill_switch, a validator code, missed...).
struct ScheduleFiringRow {
  int64_t id = 0;
  int64_t schedule_id = 0;
  int64_t workspace_id = 0;
  int64_t due_ms = 0;
  int64_t fired_ms = 0;
  std::string status;
  std::string code;
  std::string detail;
  std::optional<int64_t> scenario_run_id;
  std::optional<int64_t> experiment_id;
  int64_t missed = 0;  // a `missed` row: how many firings it stands for
};

class Store {
 public:
  // Opens the database and migrates it to this build's schema.
  [[nodiscard]] static Result<std::unique_ptr<Store>> open(const std::string& url);
  explicit Store(std::unique_ptr<SqlConnection> db, std::string url = "") : db_(std::move(db)), url_(std::move(url)) {}

  [[nodiscard]] SqlConnection& sql() { return *db_; }
  [[nodiscard]] Result<int64_t> schema_version();

  // Identity. A new workspace and its first user in one transaction; kConflict
  // if the workspace name or the email is taken.
  [[nodiscard]] Result<User> create_workspace(const std::string& workspace, const std::string& email,
                                              const std::string& password_hash, int64_t now_ms);
  [[nodiscard]] Result<std::optional<User>> user_by_email(const std::string& email);
  [[nodiscard]] Result<std::optional<Workspace>> workspace(int64_t id);

  // Tokens are stored as their SHA-256; the lookup by hash is the one query
  // not scoped by a workspace, because it is how a request's workspace is found.
  [[nodiscard]] Result<TokenRow> insert_token(int64_t ws, const std::string& kind, const std::string& hash,
                                              const std::string& hint, const std::string& name,
                                              std::optional<int64_t> user_id, std::optional<int64_t> agent_id,
                                              int64_t now_ms, std::optional<int64_t> expires_ms = std::nullopt);
  [[nodiscard]] Result<std::optional<TokenRow>> token_by_hash(const std::string& hash);
  [[nodiscard]] Result<std::vector<TokenRow>> tokens(int64_t ws);
  // False if no live token of that id is in the workspace.
  [[nodiscard]] Result<bool> revoke_token(int64_t ws, int64_t id, int64_t now_ms);

  [[nodiscard]] Result<Agent> insert_agent(int64_t ws, const AgentFacts& facts, int64_t now_ms);
  [[nodiscard]] Result<std::vector<Agent>> agents(int64_t ws);
  [[nodiscard]] Result<std::optional<Agent>> agent(int64_t ws, int64_t id);
  [[nodiscard]] Status touch_agent(int64_t ws, int64_t id, int64_t now_ms);

  [[nodiscard]] Result<Experiment> insert_experiment(int64_t ws, int64_t agent_id, const std::string& spec,
                                                     int64_t now_ms);
  [[nodiscard]] Result<std::vector<Experiment>> experiments(int64_t ws, int64_t limit);
  [[nodiscard]] Result<std::optional<Experiment>> experiment(int64_t ws, int64_t id);
  // The agent's oldest queued experiment, now dispatched under a lease that
  // ends at lease_until_ms; none if there is none or the workspace's or the
  // agent's kill switch is engaged. One conditional UPDATE: two pollers (two replicas)
  // can never both claim one experiment.
  [[nodiscard]] Result<std::optional<Experiment>> claim_next(int64_t ws, int64_t agent_id, int64_t now_ms,
                                                             int64_t lease_until_ms);
  // Experiments cancelled while on this agent whose stop it has not confirmed.
  [[nodiscard]] Result<std::vector<int64_t>> pending_stops(int64_t ws, int64_t agent_id);
  // The same for every agent of the workspace that has any, in one query
  // (agent id -> experiment ids, ascending): waking many agents at once.
  [[nodiscard]] Result<std::map<int64_t, std::vector<int64_t>>> pending_stops_by_agent(int64_t ws);
  // The agents of the workspace whose own kill switch is engaged.
  [[nodiscard]] Result<std::set<int64_t>> killed_agents(int64_t ws);
  // Moves an experiment from one of `from` to `to` (detail and record as
  // given, the lease ended); none if it is not in one of those states.
  [[nodiscard]] Result<std::optional<Experiment>> transition(int64_t ws, int64_t id,
                                                             const std::vector<std::string>& from,
                                                             const std::string& to, const std::string& detail,
                                                             const std::optional<std::string>& record, int64_t now_ms);
  // The agent confirmed a cancelled experiment stopped (its record kept).
  [[nodiscard]] Result<bool> confirm_stop(int64_t ws, int64_t id, const std::optional<std::string>& record,
                                          int64_t now_ms);
  // Cancels every experiment of the workspace not yet final and engages its
  // kill switch, in one transaction; returns the experiments it cancelled.
  [[nodiscard]] Result<std::vector<Experiment>> engage_kill(int64_t ws, int64_t now_ms);
  [[nodiscard]] Status release_kill(int64_t ws);
  // The same for one agent: its experiments end, it is given nothing new.
  // None if the agent is not in the workspace.
  [[nodiscard]] Result<std::optional<std::vector<Experiment>>> engage_agent_kill(int64_t ws, int64_t agent_id,
                                                                                 int64_t now_ms);
  [[nodiscard]] Result<bool> release_agent_kill(int64_t ws, int64_t agent_id);

  // Opens a transaction holding the workspace's write lock (the audit
  // chain's): a handler's change and its audit entry commit together or not at all.
  [[nodiscard]] Status begin(SqlTransaction& tx, int64_t ws);
  // Dispatched experiments whose lease ran out before their agent said it
  // started them (to fail one by one with expire_lease): never queued again,
  // so an experiment runs at most once.
  [[nodiscard]] Result<std::vector<Experiment>> expired_leases(int64_t now_ms);
  // Fails it if it is still dispatched with its lease run out; none otherwise.
  [[nodiscard]] Result<std::optional<Experiment>> expire_lease(int64_t ws, int64_t id, int64_t now_ms);

  // Appends to the workspace's chain under a lock, so two writers (two
  // replicas) never fork it.
  [[nodiscard]] Result<AuditEntry> append_audit(int64_t ws, const std::string& actor, const std::string& action,
                                                const std::string& object, const std::string& detail_json,
                                                int64_t now_ms);
  [[nodiscard]] Result<std::vector<AuditEntry>> audit(int64_t ws);

  // Policy bundles (migration 4). The newest version (none: never set); one
  // version; a new version, numbered after the newest (inside Store::begin, so
  // two replicas never take one number).
  [[nodiscard]] Result<std::optional<PolicyBundle>> policy(int64_t ws, std::optional<int64_t> version = std::nullopt);
  [[nodiscard]] Result<PolicyBundle> insert_policy(int64_t ws, const std::string& name, const std::string& policy,
                                                   const std::string& selector, int64_t now_ms,
                                                   const std::string& created_by);
  // Keeps an agent's policy report; false if the agent is not in the workspace.
  [[nodiscard]] Result<bool> report_policy(int64_t ws, int64_t agent_id, const PolicyReport& r, int64_t now_ms);

  // Webhooks (migration 3).
  [[nodiscard]] Result<std::optional<WebhookConfig>> webhook(int64_t ws);
  [[nodiscard]] Status put_webhook(int64_t ws, const WebhookConfig& config);
  [[nodiscard]] Result<std::optional<Workspace>> workspace_by_name(const std::string& name);
  // Records an inbound alert's signature; false if it was recorded already (a
  // replay). Signatures older than `forget_before_ms` are dropped first.
  [[nodiscard]] Result<bool> remember_alert_signature(int64_t ws, const std::string& signature, int64_t now_ms,
                                                      int64_t forget_before_ms);
  // The workspace's experiments not yet final (an alert's candidates).
  [[nodiscard]] Result<std::vector<Experiment>> active_experiments(int64_t ws);

  // Cross-replica wake-ups: on PostgreSQL a NOTIFY on `channel` (delivered at
  // commit when inside a transaction); nothing on SQLite (one replica).
  [[nodiscard]] Status notify(const std::string& channel, const std::string& payload);
  // Several notifications on `channel`, one each, in one round trip.
  [[nodiscard]] Status notify(const std::string& channel, const std::vector<std::string>& payloads);
  // A second connection LISTENing on `channel`; none on SQLite.
  [[nodiscard]] Result<std::unique_ptr<SqlListener>> listen(const std::string& channel);

  // Counts for /metrics.
  [[nodiscard]] Result<std::map<std::string, int64_t>> experiments_by_state(int64_t ws);
  [[nodiscard]] Result<int64_t> agent_count(int64_t ws);

  // The AI-agent guard (migration 5, guard_store.cpp). Activity: one entry of
  // an identity by seq; a new entry (none: that (identity, seq) is stored
  // already); a stored entry's chain verdict; a page; per-identity totals;
  // LLM usage per identity and model since a time; each identity's highest seq.
  [[nodiscard]] Result<std::optional<GuardActivityRow>> guard_activity_at(int64_t ws, const std::string& identity,
                                                                          int64_t seq);
  [[nodiscard]] Result<std::optional<int64_t>> insert_guard_activity(int64_t ws, const GuardActivityRow& row);
  [[nodiscard]] Status set_guard_activity_chain(int64_t ws, int64_t id, const std::string& chain,
                                                const std::string& detail);
  [[nodiscard]] Result<std::vector<GuardActivityRow>> guard_activity(int64_t ws, const GuardActivityFilter& f);
  [[nodiscard]] Result<std::vector<GuardIdentitySummary>> guard_activity_summary(int64_t ws,
                                                                                 std::optional<int64_t> since_ms,
                                                                                 std::optional<int64_t> until_ms);
  [[nodiscard]] Result<std::vector<GuardUsageRow>> guard_usage(int64_t ws, int64_t since_ms);
  // The MCP servers the guards saw: one row per server, tool and identity.
  [[nodiscard]] Result<std::vector<McpToolUseRow>> mcp_tool_use(int64_t ws, int64_t since_ms);
  // Approvals: a new one (an existing one of the same request_id is returned
  // as it is, with false: a guard's retry); one; the newest `limit`, pending
  // first; a pending, unexpired one moved to `to` (none: it was not).
  [[nodiscard]] Result<std::pair<GuardApproval, bool>> insert_guard_approval(int64_t ws, const GuardApproval& a);
  [[nodiscard]] Result<std::optional<GuardApproval>> guard_approval(int64_t ws, int64_t id);
  [[nodiscard]] Result<std::vector<GuardApproval>> guard_approvals(int64_t ws, int64_t limit, int64_t now_ms);
  [[nodiscard]] Result<std::optional<GuardApproval>> settle_guard_approval(int64_t ws, int64_t id,
                                                                           const std::string& to, const std::string& by,
                                                                           const std::string& reason, int64_t now_ms);
  // The guard section: the newest version or one version; a new version.
  [[nodiscard]] Result<std::optional<GuardPolicyVersion>> guard_policy(int64_t ws,
                                                                       std::optional<int64_t> version = std::nullopt);
  [[nodiscard]] Result<GuardPolicyVersion> insert_guard_policy(int64_t ws, const std::string& section, int64_t now_ms,
                                                               const std::string& created_by);
  // Guard alerts (migration 8, alert_store.cpp).
  [[nodiscard]] Result<std::optional<GuardAlertSettings>> guard_alerts(int64_t ws);
  [[nodiscard]] Status put_guard_alerts(int64_t ws, const GuardAlertSettings& s);
  // Whether one more alert of `trigger` goes now (no delivery within
  // `cooldown_ms`), counting it held back if not. Call inside begin(tx, ws).
  [[nodiscard]] Result<GuardAlertGate> pass_guard_alert(int64_t ws, const std::string& trigger, int64_t now_ms,
                                                        int64_t cooldown_ms);
  // The workspaces whose digest is on.
  [[nodiscard]] Result<std::vector<std::pair<int64_t, GuardAlertSettings>>> guard_digests();
  // Moves the digest's mark from `was_s` to `now_s`; false if another
  // replica moved it first (it sends that digest).
  [[nodiscard]] Result<bool> claim_guard_digest(int64_t ws, int64_t was_s, int64_t now_s);
  // The activity of [since_ms, until_ms) on the entries' time, grouped.
  [[nodiscard]] Result<std::vector<GuardFindingCount>> guard_finding_counts(int64_t ws, int64_t since_ms,
                                                                            int64_t until_ms);
  [[nodiscard]] Result<std::optional<GuardProctor>> guard_proctor(int64_t ws);
  [[nodiscard]] Status put_guard_proctor(int64_t ws, const GuardProctor& p);
  // The shared LLM budget, each call one transaction under the workspace's
  // lock (so guards reserving at once, on any replica, cannot overshoot): a
  // reservation of `tokens` and one request if both limits (none: no limit)
  // still hold; a reservation ended by what the call was billed, or released
  // (billed none: its request given back too), false if it is not open (ended
  // already, or its window is over); the current window's charge.
  [[nodiscard]] Result<GuardBudgetReservation> reserve_guard_budget(int64_t ws, const std::string& identity,
                                                                    int64_t window_s, int64_t tokens,
                                                                    std::optional<int64_t> token_limit,
                                                                    std::optional<int64_t> request_limit,
                                                                    int64_t now_ms, const std::string& by);
  [[nodiscard]] Result<bool> end_guard_budget_reservation(int64_t ws, int64_t id, std::optional<int64_t> billed);
  [[nodiscard]] Result<GuardBudgetCharge> guard_budget(int64_t ws, const std::string& identity, int64_t window_s,
                                                       int64_t now_ms);

  // Services (migration 7, service_store.cpp): a new one (kConflict when the
  // name is taken in the workspace; call inside Store::begin); all, by name;
  // one by id or by name; one removed (false: it was not there).
  [[nodiscard]] Result<ServiceRow> insert_service(int64_t ws, const std::string& name, const std::string& spec,
                                                  int64_t now_ms, const std::string& created_by);
  [[nodiscard]] Result<std::vector<ServiceRow>> services(int64_t ws);
  [[nodiscard]] Result<std::optional<ServiceRow>> service(int64_t ws, int64_t id);
  [[nodiscard]] Result<std::optional<ServiceRow>> service_by_name(int64_t ws, const std::string& name);
  [[nodiscard]] Result<bool> delete_service(int64_t ws, int64_t id);

  // The proposer's runs (migration 9, proposal_store.cpp): one recorded (call
  // inside Store::begin); the newest first; one by id; a waiting one decided
  // (false: it was not awaiting_approval any more).
  [[nodiscard]] Result<ProposalRow> insert_proposal(int64_t ws, const std::string& service, const std::string& mode,
                                                    const std::string& state, const std::string& code,
                                                    const std::string& run, int64_t now_ms, const std::string& by);
  [[nodiscard]] Result<std::vector<ProposalRow>> proposals(int64_t ws, int64_t limit);
  [[nodiscard]] Result<std::optional<ProposalRow>> proposal(int64_t ws, int64_t id);
  [[nodiscard]] Result<bool> decide_proposal(int64_t ws, int64_t id, const std::string& state, int64_t now_ms,
                                             const std::string& by, const std::string& reason,
                                             std::optional<int64_t> experiment_id);

  // Scenarios (migration 10, scenario_store.cpp): one stored (kConflict when
  // the name is taken in the workspace; call inside Store::begin); all, by
  // name; one. Runs: one started (with its first checkpoint, inside
  // Store::begin); one; the newest first; one's state, code, detail and steps.
  [[nodiscard]] Result<ScenarioRow> insert_scenario(int64_t ws, const std::string& name, const std::string& doc,
                                                    int64_t now_ms, const std::string& by);
  [[nodiscard]] Result<std::vector<ScenarioRow>> scenarios(int64_t ws);
  [[nodiscard]] Result<std::optional<ScenarioRow>> scenario(int64_t ws, int64_t id);
  [[nodiscard]] Result<ScenarioRunRow> insert_scenario_run(int64_t ws, int64_t scenario_id, int64_t agent_id,
                                                           int64_t now_ms, int64_t ends_by_ms, const std::string& by);
  [[nodiscard]] Result<std::optional<ScenarioRunRow>> scenario_run(int64_t ws, int64_t id);
  [[nodiscard]] Result<std::vector<ScenarioRunRow>> scenario_runs(int64_t ws, int64_t limit);
  [[nodiscard]] Status update_scenario_run(int64_t ws, const ScenarioRunRow& run, int64_t now_ms);
  // Checkpoints: those due by now, every workspace's (what a worker looks
  // at); one claimed by deleting it (none: not there, not due by `due_by_ms`,
  // or another worker took it first); one written (a run's next step).
  [[nodiscard]] Result<std::vector<ScenarioCheckpoint>> due_scenario_checkpoints(int64_t now_ms);
  [[nodiscard]] Result<std::optional<ScenarioCheckpoint>> claim_scenario_checkpoint(int64_t ws, int64_t run_id,
                                                                                    int64_t due_by_ms);
  [[nodiscard]] Status put_scenario_checkpoint(const ScenarioCheckpoint& c);

  // Schedules (migration 11, schedule_store.cpp): one stored (kConflict when
  // the name is taken; inside Store::begin); all, by name; one; enabled or
  // not (with its next firing); one deleted with its firings (false: none).
  [[nodiscard]] Result<ScheduleRow> insert_schedule(const ScheduleRow& s);
  [[nodiscard]] Result<std::vector<ScheduleRow>> schedules(int64_t ws);
  [[nodiscard]] Result<std::optional<ScheduleRow>> schedule(int64_t ws, int64_t id);
  [[nodiscard]] Status set_schedule_enabled(int64_t ws, int64_t id, bool enabled, std::optional<int64_t> next_due_ms);
  [[nodiscard]] Result<bool> delete_schedule(int64_t ws, int64_t id);
  // Those due by now, every workspace's (what a worker looks at); a firing
  // claimed by moving next_due_ms from `due_ms` to `next_ms` (false: another
  // worker took it, or the schedule changed); firings written, updated,
  // listed (newest first) and the schedule's last started one.
  [[nodiscard]] Result<std::vector<ScheduleRow>> due_schedules(int64_t now_ms);
  [[nodiscard]] Result<bool> claim_schedule_firing(int64_t ws, int64_t id, int64_t due_ms,
                                                   std::optional<int64_t> next_ms);
  [[nodiscard]] Result<ScheduleFiringRow> insert_schedule_firing(const ScheduleFiringRow& f);
  [[nodiscard]] Status update_schedule_firing(const ScheduleFiringRow& f);
  [[nodiscard]] Result<std::vector<ScheduleFiringRow>> schedule_firings(int64_t ws, int64_t schedule_id, int64_t limit);
  [[nodiscard]] Result<std::optional<ScheduleFiringRow>> last_started_firing(int64_t ws, int64_t schedule_id);

 private:
  std::unique_ptr<SqlConnection> db_;
  std::string url_;  // to open the listener's own connection
};

}  // namespace faultline::cp
