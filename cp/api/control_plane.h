// faultcp's API: the routes, the auth layer in front of them (one place that
// turns a bearer token into the caller's workspace, which every store call
// then takes), the agents' long polls and the activity log. Runs on the
// serving thread of one HttpServer: handlers, long-poll wake-ups and timers
// never run at once, so the store and the waiters need no locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "cp/auth/crypto.h"
#include "cp/auth/rate_limiter.h"
#include "cp/auth/tokens.h"
#include "cp/storage/store.h"
#include "cp/webhooks/webhook_sender.h"
#include "userspace/net/http_router.h"
#include "userspace/net/http_server.h"
#include "userspace/orchestration/clock.h"
#include "userspace/orchestration/facts.h"
#include "userspace/orchestration/proposer.h"
#include "userspace/orchestration/scenario.h"

namespace faultline::cp {

// The NOTIFY channel every replica on one PostgreSQL database listens on.
inline constexpr const char* kWakeChannel = "faultcp_wake";
// The agent id of a wake-up for every agent of a workspace (a new policy).
inline constexpr int64_t kEveryAgent = 0;

struct ControlPlaneConfig {
  // How long GET /v1/agents/{id}/next holds a request that has nothing to say.
  std::chrono::milliseconds poll_timeout{25'000};
  // How long a dispatched experiment may wait for its agent to say "running"
  // before it fails (it is never dispatched again).
  std::chrono::milliseconds lease{60'000};
  std::chrono::milliseconds lease_sweep{1'000};
  ScryptParams scrypt{};
  RateLimit login_per_address{20, std::chrono::milliseconds(60'000)};  // attempts
  RateLimit login_per_account{5, std::chrono::milliseconds(300'000)};  // failures
  size_t max_body = 64 * 1024;                                         // the server's request limit
  std::chrono::milliseconds session_ttl{12 * 3600 * 1000};             // a login's token lives this long
  WebhookRetryPolicy webhook_retry{};
  std::chrono::seconds alert_window{60};  // an inbound alert's timestamp, either way of the clock
  // Where the services' SLO series are read (--prometheus-url); none: not set.
  std::shared_ptr<InstantQuery> prometheus;
  // A service instance is ready when its agent polled within this long (and
  // its kill switch is released): faultcp's one sign of an agent's health.
  std::chrono::milliseconds agent_ready_within{60'000};
  // The validator's clock (its windows); none: the host's.
  std::shared_ptr<const Clock> clock;
  // The guard digests' schedule: how often it is read, and its clock (none: the host's).
  std::chrono::milliseconds digest_check{60'000};
  std::shared_ptr<const Clock> digest_clock;
  // The proposer (--proposer, docs/orchestration.md#the-proposer); none: off.
  // Its model calls run on the serving thread.
  std::shared_ptr<Proposer> proposer;
  // How often the scenario worker looks for due checkpoints (a run's next
  // step, a step's experiment ended).
  std::chrono::milliseconds scenario_tick{1'000};
  // How often the schedule worker looks for due firings, and how late a
  // firing may be and still fire (later: faultcp was down; recorded `missed`).
  std::chrono::milliseconds schedule_tick{1'000};
  std::chrono::milliseconds schedule_grace{60'000};
};

// The alert trigger of a guard activity entry (api_guard_alerts.cpp), or none
// for an entry that raises no alert.
[[nodiscard]] std::optional<std::string> guard_alert_trigger(const ActivityEntry& e);
// The scheduled time (Unix seconds) of the digest due now: the last daily or
// weekly boundary at or before `now_s` when no digest went since; none otherwise.
[[nodiscard]] std::optional<int64_t> guard_digest_due(const GuardAlertSettings& s, int64_t now_s);

// Who a request comes from, as the auth layer resolved it.
struct Principal {
  int64_t workspace_id = 0;
  TokenKind kind = TokenKind::Session;
  int64_t token_id = 0;
  std::optional<int64_t> user_id, agent_id;
  [[nodiscard]] std::string actor() const;  // "user:3", "token:9", "agent:4"
};

class ControlPlane {
 public:
  // The server must outlive this; the ControlPlane sets its request log.
  ControlPlane(Store& store, HttpServer& server, ControlPlaneConfig config);
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // The handler of the API listener (this must outlive the server's run()).
  [[nodiscard]] HttpHandler handler() const { return router_.handler(); }
  // Arms the timers (the lease sweep), starts the webhook sender and, on
  // PostgreSQL, listens for the other replicas' wake-ups; call once before
  // the server runs.
  [[nodiscard]] Status start();

 private:
  using Handler = std::function<HttpReply(const HttpRequest&, const PathParams&, const Principal&)>;
  // The auth layer: a route that takes a bearer token of one of `kinds`.
  void add_route(const std::string& method, const std::string& pattern, std::initializer_list<TokenKind> kinds,
                 Handler handler);
  void add_open_route(const std::string& method, const std::string& pattern, RouteHandler handler);
  [[nodiscard]] std::variant<Principal, HttpReply> authenticate(const HttpRequest& req,
                                                                const std::vector<TokenKind>& kinds);
  // Appends to the workspace's activity log. Called inside the action's
  // transaction (Store::begin): a failure here is returned as a 500 and the
  // transaction's end undoes the action, so no change goes unlogged.
  [[nodiscard]] Status audit(const Principal& who, const std::string& action, const std::string& object,
                             const nlohmann::json& detail = nlohmann::json::object());
  [[nodiscard]] Status audit_as(int64_t workspace_id, const std::string& actor, const std::string& action,
                                const std::string& object, const nlohmann::json& detail);
  [[nodiscard]] static HttpReply storage_error(const Error& e);
  [[nodiscard]] int64_t now_ms() const;

  // Routes (api_identity.cpp, api_agents.cpp, api_experiments.cpp, api_audit.cpp).
  HttpReply signup(const HttpRequest& req);
  HttpReply login(const HttpRequest& req);
  HttpReply create_token(const HttpRequest& req, const Principal& p);
  HttpReply list_tokens(const Principal& p);
  HttpReply revoke_token(const PathParams& params, const Principal& p);
  HttpReply register_agent(const HttpRequest& req, const Principal& p);
  HttpReply list_agents(const Principal& p);
  HttpReply get_agent(const PathParams& params, const Principal& p);
  HttpReply next_for_agent(const HttpRequest& req, const PathParams& params, const Principal& p);
  HttpReply agent_event(const HttpRequest& req, const PathParams& params, const Principal& p);
  HttpReply create_experiment(const HttpRequest& req, const Principal& p);
  // One experiment to start: on which agent, its spec, its audit entry's detail.
  struct PlannedExperiment {
    Agent agent;
    nlohmann::json spec;
    nlohmann::json detail;
  };
  struct ExtraAudit {  // an audit entry written with them
    std::string action, object;
    nlohmann::json detail;
  };
  [[nodiscard]] std::variant<nlohmann::json, HttpReply> start_experiments(
      const Principal& p, const std::vector<PlannedExperiment>& plans, const std::string& field,
      const std::optional<ExtraAudit>& also = std::nullopt);
  // POST /v1/chaos-mesh (api_chaos_mesh.cpp): a Chaos Mesh document's selectors
  // resolved against the registered services and agents.
  HttpReply apply_chaos_mesh(const HttpRequest& req, const Principal& p);
  [[nodiscard]] std::variant<std::vector<Agent>, HttpReply> select_agents(const nlohmann::json& body,
                                                                          const Principal& p);
  HttpReply list_experiments(const HttpRequest& req, const Principal& p);
  HttpReply get_experiment(const PathParams& params, const Principal& p);
  HttpReply abort_experiment(const PathParams& params, const Principal& p);
  HttpReply engage_kill(const HttpRequest& req, const Principal& p);
  HttpReply release_kill(const HttpRequest& req, const Principal& p);
  HttpReply kill_status(const HttpRequest& req, const Principal& p);
  HttpReply audit_export(const Principal& p);
  HttpReply audit_verify(const HttpRequest& req, const Principal& p);
  HttpReply audit_csv(const Principal& p);
  [[nodiscard]] std::variant<std::optional<int64_t>, HttpReply> kill_target(const HttpRequest& req, const Principal& p);
  HttpReply put_webhooks(const HttpRequest& req, const Principal& p);
  HttpReply get_webhooks(const Principal& p);
  HttpReply alert(const HttpRequest& req);
  // A signed inbound hook (/webhooks/alert, /webhooks/trigger/{id}): its
  // workspace, the actor it is audited as ("alert:ADDR") and its signature.
  struct SignedHook {
    int64_t workspace_id = 0;
    std::string actor;
    std::string signature;
  };
  [[nodiscard]] std::variant<SignedHook, HttpReply> verify_signed_hook(const HttpRequest& req, const std::string& kind,
                                                                       const std::string& route);
  [[nodiscard]] Status refuse_signed_hook(const SignedHook& hook, const std::string& kind, const std::string& field,
                                          const std::string& why);
  [[nodiscard]] Result<bool> first_delivery(const SignedHook& hook);
  // POST /webhooks/trigger/{id}?workspace=NAME (api_scenarios.cpp): a run of
  // scenario {id}, signed as an alert is.
  HttpReply trigger_scenario(const HttpRequest& req, const PathParams& params);
  [[nodiscard]] static nlohmann::json webhook_json(const WebhookConfig& c);
  [[nodiscard]] static HttpReply dashboard_file(const std::string& name);
  HttpReply healthz();
  HttpReply metrics(const Principal& p);

  // Policy distribution (api_policy.cpp). A bundle read from a body and
  // checked (parse_policy, check_appliable off-host, compile_policy).
  struct StagedPolicy {
    std::string name;
    std::string text;  // canonical (policy_json_text)
    nlohmann::json selector;
    nlohmann::json summary;
    bool dry_run = false;
    bool same_as_latest = false;
    std::optional<int64_t> latest_version;
  };
  [[nodiscard]] std::variant<StagedPolicy, HttpReply> read_bundle(const HttpRequest& req, const Principal& p);
  [[nodiscard]] std::variant<PolicyBundle, HttpReply> store_bundle(const StagedPolicy& s, const Principal& p,
                                                                   const std::string& action, bool& created);
  HttpReply put_policy(const HttpRequest& req, const Principal& p);
  HttpReply get_policy(const HttpRequest& req, const Principal& p, bool as_file);
  HttpReply apply_policy_route(const HttpRequest& req, const Principal& p);
  // POST /v1/agents/{id}/policy: what the agent made of the version it was given.
  HttpReply agent_policy_report(const HttpRequest& req, const PathParams& params, const Principal& p);
  // The newest bundle for this agent when it has not reported on that version
  // yet: {version, selected, text} (text empty when not selected); none otherwise.
  [[nodiscard]] Result<std::optional<nlohmann::json>> policy_for_agent(int64_t ws, int64_t agent_id);

  // Long polls (api_agents.cpp). What an agent is told: an experiment to run,
  // experiments to stop, whether the kill switch is engaged; none when there
  // is nothing new. Claims an experiment only for a poll still waiting.
  // With `known` (waking many agents at once), the kill switches and the
  // pending stops come from it instead of three queries per agent.
  struct KnownStops {
    bool workspace_killed = false;
    std::set<int64_t> killed_agents;
    std::map<int64_t, std::vector<int64_t>> stops;  // agent -> experiments to stop
  };
  [[nodiscard]] Result<std::optional<nlohmann::json>> next_payload(int64_t ws, int64_t agent_id, uint64_t exchange,
                                                                   const KnownStops* known = nullptr);
  [[nodiscard]] Result<nlohmann::json> idle_payload(int64_t ws, int64_t agent_id);
  [[nodiscard]] Result<KnownStops> known_stops(int64_t ws);
  // Answers the agents' waiting polls that now have something to say, here
  // and (PostgreSQL) on every other replica through a NOTIFY (one round trip
  // for all of them).
  void wake_agent(int64_t ws, int64_t agent_id) { wake_agents(ws, {agent_id}); }
  void wake_agents(int64_t ws, const std::set<int64_t>& agent_ids);
  void wake_local(int64_t ws, const std::set<int64_t>& agent_ids);
  // The other replicas' wake-ups ("REPLICA WS AGENT"), read from the listener.
  void take_notifications();
  void reopen_listener();

  // Outbound webhooks (api_webhooks.cpp): queued for the sender thread unless
  // the workspace does not want the trigger or it is cooling down.
  void fire_webhook(int64_t ws, const std::string& trigger, const std::string& title, const std::string& text,
                    const nlohmann::json& fields);
  void fire_experiment_webhook(const Experiment& e, const std::string& trigger, const std::string& by);
  // Writes the sender's outcomes (delivered, failed after its retries) to the activity log.
  void webhook_outcomes();
  void end_poll(uint64_t exchange);
  void sweep_leases();

  // The AI-agent guard's side (api_guardrails.cpp: approvals, the guard
  // section, the proctor's settings; api_guard_activity.cpp: activity).
  // Guards post and long-poll; people list and decide.
  HttpReply post_guard_approval(const HttpRequest& req, const Principal& p);
  HttpReply list_guard_approvals(const HttpRequest& req, const Principal& p);
  HttpReply guard_approval_decision(const HttpRequest& req, const PathParams& params, const Principal& p);
  HttpReply decide_guard_approval(const HttpRequest& req, const PathParams& params, const Principal& p, bool approve);
  HttpReply withdraw_guard_approval(const PathParams& params, const Principal& p);
  HttpReply put_guard_policy(const HttpRequest& req, const Principal& p);
  HttpReply get_guard_policy(const HttpRequest& req, const Principal& p);
  HttpReply put_guard_proctor(const HttpRequest& req, const Principal& p);
  HttpReply get_guard_proctor(const Principal& p);
  HttpReply post_proctor_review(const HttpRequest& req, const Principal& p);
  HttpReply post_guard_activity(const HttpRequest& req, const Principal& p);
  HttpReply list_guard_activity(const HttpRequest& req, const Principal& p);
  HttpReply guard_activity_summary(const HttpRequest& req, const Principal& p);
  HttpReply guard_usage(const HttpRequest& req, const Principal& p);
  HttpReply mcp_servers(const HttpRequest& req, const Principal& p);
  // Alerts (api_guard_alerts.cpp): the settings, the alerts a batch of new
  // entries raises, the digests and the two test routes.
  HttpReply put_guard_alerts(const HttpRequest& req, const Principal& p);
  HttpReply get_guard_alerts(const Principal& p);
  HttpReply test_guard_alert(const Principal& p);
  HttpReply test_guard_digest(const Principal& p);
  [[nodiscard]] nlohmann::json guard_alerts_json(const GuardAlertSettings& s);
  [[nodiscard]] const Clock& digest_clock() const;
  void raise_guard_alerts(int64_t ws, const std::vector<GuardActivityRow>& rows);
  [[nodiscard]] bool send_guard_alert(int64_t ws, const GuardAlertSettings& s, const std::string& trigger,
                                      nlohmann::json envelope);
  // The digest of the period that ends with the second `until_s` (the
  // counts of its entries, `until_s` included).
  [[nodiscard]] static nlohmann::json guard_digest(const std::string& period, int64_t until_s,
                                                   const std::vector<GuardFindingCount>& counts);
  void send_due_digests();
  // The shared LLM budget (api_guard_budget.cpp): reserve, settle (settle
  // true) or release, and the current window's charge.
  HttpReply reserve_guard_budget(const HttpRequest& req, const Principal& p);
  HttpReply end_guard_budget(const HttpRequest& req, const Principal& p, bool settle);
  HttpReply get_guard_budget(const HttpRequest& req, const Principal& p);
  // A guard's held request: an approval's decision, or a guard section newer
  // than `id` (a version). Answered by a decision, a new version or the timer.
  struct GuardWait {
    int64_t workspace_id = 0;
    bool policy = false;  // false: approval `id`; true: a version after `id`
    int64_t id = 0;
  };
  // The answer a guard's wait gets now; none while it should keep waiting.
  [[nodiscard]] std::optional<HttpReply> guard_wait_answer(const GuardWait& w, bool timed_out);
  // Answers the waits a decision or a new version concerns, here and (a
  // NOTIFY "REPLICA WS approval ID" / "REPLICA WS guard-policy VERSION") on
  // every other replica.
  void wake_guard(int64_t ws, bool policy, int64_t id);
  void wake_guard_local(int64_t ws, bool policy, int64_t id);
  void end_guard_wait(uint64_t exchange);

  // The orchestration's services and facts (api_services.cpp).
  HttpReply create_service(const HttpRequest& req, const Principal& p);
  HttpReply list_services(const Principal& p);
  HttpReply get_service(const PathParams& params, const Principal& p);
  HttpReply delete_service(const PathParams& params, const Principal& p);
  HttpReply service_profile(const PathParams& params, const Principal& p);
  HttpReply service_slo(const PathParams& params, const Principal& p);
  HttpReply validate_proposal(const HttpRequest& req, const Principal& p);
  HttpReply list_catalogue();
  HttpReply get_template(const PathParams& params);
  HttpReply render_catalogue_template(const HttpRequest& req, const PathParams& params);
  // The proposer's runs and a person's decision (api_proposals.cpp).
  HttpReply run_proposer(const HttpRequest& req, const Principal& p);
  HttpReply list_proposals(const HttpRequest& req, const Principal& p);
  HttpReply get_proposal(const PathParams& params, const Principal& p);
  HttpReply decide_proposal(const HttpRequest& req, const PathParams& params, const Principal& p, bool approve);
  // Scenarios and their runs (api_scenarios.cpp): the routes, and the worker
  // that claims a run's checkpoint, settles its step and starts the next.
  HttpReply create_scenario(const HttpRequest& req, const Principal& p);
  HttpReply list_scenarios(const Principal& p);
  HttpReply get_scenario(const PathParams& params, const Principal& p);
  HttpReply run_scenario(const HttpRequest& req, const PathParams& params, const Principal& p);
  HttpReply list_scenario_runs(const Principal& p);
  HttpReply get_scenario_run(const PathParams& params, const Principal& p);
  HttpReply abort_scenario_run(const PathParams& params, const Principal& p);
  // `in_tx` runs first inside the run's transaction (a trigger's replay
  // check); a reply from it is returned and nothing is kept.
  [[nodiscard]] std::variant<ScenarioRunRow, HttpReply> start_scenario_run(
      int64_t ws, const ScenarioRow& scenario, int64_t agent_id, const std::string& by, const nlohmann::json& detail,
      const std::function<std::optional<HttpReply>()>& in_tx = {});
  void advance_scenarios();
  void advance_scenario_run(int64_t ws, int64_t run_id);
  [[nodiscard]] Status step_scenario_run(const ScenarioCheckpoint& c, std::optional<int64_t>& woken);
  [[nodiscard]] Status start_scenario_step(ScenarioRunRow& run, const Scenario& s, const nlohmann::json& doc,
                                           size_t index, std::optional<int64_t>& woken);
  [[nodiscard]] Result<std::optional<nlohmann::json>> refuse_scenario_step(const ScenarioRunRow& run,
                                                                           const ScenarioStep& step,
                                                                           const nlohmann::json& step_doc);
  [[nodiscard]] Status finish_scenario_run(const ScenarioRunRow& run);

  // Schedules and their firings (api_schedules.cpp): the routes, and the
  // worker firing each due schedule once.
  HttpReply create_schedule(const HttpRequest& req, const Principal& p);
  HttpReply list_schedules(const Principal& p);
  HttpReply get_schedule(const PathParams& params, const Principal& p);
  HttpReply patch_schedule(const HttpRequest& req, const PathParams& params, const Principal& p);
  HttpReply delete_schedule(const PathParams& params, const Principal& p);
  HttpReply list_schedule_firings(const PathParams& params, const Principal& p);
  void fire_schedules();
  void fire_schedule(const ScheduleRow& seen);
  [[nodiscard]] Status claim_schedule_firing(const ScheduleRow& seen, ScheduleFiringRow& firing,
                                             std::optional<int64_t>& woken);

  Store& store_;
  HttpServer& server_;
  ControlPlaneConfig config_;
  HttpRouter router_;
  RateLimiter login_by_address_;
  RateLimiter login_failures_by_account_;
  struct Poll {
    int64_t workspace_id;
    int64_t agent_id;
    bool protobuf = false;  // the agent's Accept: the answer as a NextReply
  };
  std::map<uint64_t, Poll> polls_;             // exchange -> the waiting agent
  std::map<uint64_t, GuardWait> guard_waits_;  // exchange -> the waiting guard
  std::map<int, uint64_t> responses_by_code_;
  // Requests to the agent routes by the answer's format (Accept): JSON for
  // people and scripts, protobuf for faultd.
  uint64_t agent_requests_json_ = 0, agent_requests_protobuf_ = 0;
  void count_agent_request(const HttpRequest& req);
  uint64_t audit_failures_ = 0;
  std::unique_ptr<WebhookSender> webhooks_;
  std::map<std::pair<int64_t, std::string>, int64_t> last_fired_ms_;  // (workspace, trigger) -> last delivery queued
  uint64_t next_delivery_ = 0;
  uint64_t last_guard_delivery_ = 0;  // the id send_guard_alert() queued last
  std::unique_ptr<SqlListener> listener_;
  std::string replica_;  // this process's name in NOTIFY payloads (its own are skipped)
};

// JSON of the stored objects, as the API shows them.
[[nodiscard]] nlohmann::json agent_json(const Agent& a);
[[nodiscard]] nlohmann::json experiment_json(const Experiment& e);
// experiment_json(e).dump()'s text, appended to out without building the DOM
// (the listing's hot path).
void append_experiment_json(std::string& out, const Experiment& e);
[[nodiscard]] nlohmann::json audit_entry_json(const AuditEntry& e);
[[nodiscard]] nlohmann::json policy_bundle_json(const PolicyBundle& b);
// A path's {id}: digits only; anything else is "not found".
[[nodiscard]] std::optional<int64_t> path_id(const PathParams& params, const std::string& name = "id");

}  // namespace faultline::cp
