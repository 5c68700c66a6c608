// The guard as the proxy's RequestJudge: each request head becomes facts, the
// policy decides, and the verdict is forwarded, answered (a final denial) or
// held for approval; every decision is one activity line.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "userspace/guard/activity_log.h"
#include "userspace/guard/anomaly.h"
#include "userspace/guard/approval_queue.h"
#include "userspace/guard/circuit_breaker.h"
#include "userspace/guard/clickhouse_sql.h"
#include "userspace/guard/dlp_engine.h"
#include "userspace/guard/exec_gate.h"
#include "userspace/guard/exec_grants.h"
#include "userspace/guard/guard_answer.h"
#include "userspace/guard/guard_policy.h"
#include "userspace/guard/intent_firewall.h"
#include "userspace/guard/llm_budget.h"
#include "userspace/guard/llm_cache_optimizer.h"
#include "userspace/guard/llm_replay.h"
#include "userspace/guard/llm_request_scan.h"
#include "userspace/guard/llm_usage.h"
#include "userspace/guard/mirror_watch.h"
#include "userspace/guard/prompt_guard.h"
#include "userspace/guard/receipts.h"
#include "userspace/guard/response_guard.h"
#include "userspace/guard/task_thread.h"
#include "userspace/guard/wasm_policy.h"
#include "userspace/proxy/request_judge.h"

namespace faultline {

// What the guard does with a DLP finding (--dlp-action) and with a content
// policy's (--content-policy-action).
enum class DlpAction : uint8_t { deny, redact, monitor };
enum class ContentAction : uint8_t { deny, approve, monitor };

// --dlp and --content-policy: one engine (both compiled into one Hyperscan
// database) scanning each request's URL, headers and body.
struct GuardDlpOptions {
  std::shared_ptr<const DlpEngine> engine;  // null: neither is on
  bool dlp = false;                         // the detectors' findings count
  DlpAction action = DlpAction::deny;
  std::vector<HostMatcher> hosts;  // --dlp-host; empty: all egress
  bool content = false;            // the content policy's findings count
  ContentAction content_action = ContentAction::deny;
  std::vector<HostMatcher> content_hosts;  // --content-policy-host; empty: all
  // --honeytokens: the engine also holds the decoys' rules (labels
  // "honeytoken.KIND"); a match in any request is critical, denied (rule
  // honeytoken) when enforcing.
  bool honeytokens = false;
};

// --prompt-guard: each LLM call's prompt (system, user and tool_result texts)
// scanned for injection (docs/detectors.md, "Prompt injection").
enum class PromptAction : uint8_t { deny, approve, monitor };
struct GuardPromptOptions {
  std::shared_ptr<PromptGuard> guard;  // null: off
  PromptAction action = PromptAction::deny;
  std::vector<HostMatcher> hosts;  // --prompt-guard-host; empty: every LLM call (the --llm-host set)
};

// --scan-responses, --block-responses: each LLM answer's texts read for a
// secret or injection text (response_guard.h); a threat is a response_threat
// line, and with block (acting with --enforce) the answer is stopped.
struct GuardResponseOptions {
  std::shared_ptr<const ResponseGuard> guard;  // null: off
  bool block = false;
};

// --intent-action: what an off-mission request gets when enforcing (monitor:
// a finding only, the default).
enum class IntentEnforce : uint8_t { monitor, deny, approve };

// A finding of a request and where it was: "url", "header NAME", "body".
struct DlpFound {
  std::string where;
  DlpFinding finding;
};

struct GuardJudgeOptions {
  std::string identity;  // the activity log's and the approvals' identity
  // The proxy terminates CONNECT tunnels: their inner requests are judged with
  // the full path, so the tunnel itself (CONNECT, SNI) is let through unjudged.
  bool terminate_tls = false;
  std::chrono::milliseconds approve_timeout{120'000};
  std::string approval_prefix;               // starts every approval id (the guard's pid)
  std::shared_ptr<ActivityWriter> activity;  // may be null: no activity log
  // One line per decision for people (stderr); may be empty. Called on a
  // worker thread: it must be quick.
  std::function<void(const std::string&)> log;

  // The LLM layer. A POST to /v1/messages, /v1/chat/completions or
  // /v1/responses on an LLM host has its body scanned for the facts
  // (model, max tokens) before it is decided, its answer read for usage.
  // llm_hosts: --llm-host (a host, *.suffix, or host:port); empty: any host
  // on those paths (a stand-in, a gateway, the providers' own).
  std::vector<std::string> llm_hosts;
  std::vector<LlmModelRoute> routes;    // --route-model
  std::shared_ptr<BudgetStore> budget;  // null: no budget
  LlmBudgetLimits budget_limits;        // what a call reserves (its ceiling, else the default)
  // --replay DIR (or --cache: the same in memory, with a TTL): an allowed
  // LLM call whose key has a recording is answered from it (nothing goes
  // upstream, no budget is charged); any other is forwarded and its whole
  // 2xx answer recorded. Null: off.
  std::shared_ptr<ReplayStore> replay;
  // --optimize-cache: an Anthropic Messages call's tools ordered by name and
  // cache_control breakpoints placed (llm_cache_optimizer.h); monitor logs
  // what enforce would change.
  CacheOptimizeMode optimize_cache = CacheOptimizeMode::off;
  GuardDlpOptions dlp;
  GuardPromptOptions prompt;
  // --trace-tools: each tool call an LLM answer decides is an activity line
  // (kind tool_call, rule "tool:NAME") and a log line with its arguments
  // masked by this engine's detectors (the --dlp engine, or one made for it).
  std::shared_ptr<const DlpEngine> trace_tools;  // null: off
  GuardResponseOptions responses;
  // --circuit-breaker: each finding and denial adds its risk (null: off).
  std::shared_ptr<CircuitBreaker> breaker;
  // --anomaly: a host not seen in the warm-up is flagged (null: off).
  std::shared_ptr<AnomalyWatch> anomaly;
  // --intent-firewall: the mission from the first user turn of the session's
  // model calls; each later request, tool call and exec judged against it
  // (intent_firewall.h): an off-mission one is a finding (kind
  // off-mission-action, rule intent-firewall); a request is denied or held
  // by intent_action when enforcing. An unclear one goes to its judge model,
  // if any, on the judge's own thread (failing open). Null: off.
  std::shared_ptr<IntentFirewall> intent;
  IntentEnforce intent_action = IntentEnforce::monitor;
  // --mirror: the hosts each LLM call's prompt names, by trust; a write to a
  // host named only by tool content is flagged (kind mirror). Null: off.
  std::shared_ptr<MirrorWatch> mirror;
  // --receipts: the claims of each LLM answer checked against the tool runs
  // of its request's history (receipts.h), read with these detectors. Null: off.
  std::shared_ptr<const ResponseGuard> receipts;
  // --wasm-policy: plugins asked in order about each request the rules and
  // detectors allowed or held; the first that denies decides (rule
  // "wasm:NAME"). A plugin that traps, runs out of fuel or answers badly is a
  // finding (kind wasm) and the request goes on, or with --wasm-fail-closed
  // it is denied (rule wasm-policy). Empty: off.
  std::vector<std::shared_ptr<const WasmPolicy>> wasm;
  bool wasm_fail_closed = false;
  // --clickhouse-host: a request to one of these hosts is ClickHouse's HTTP
  // interface: the SQL of its ?query= and of its body's first 64 KiB is
  // judged statement by statement by the SQL rules (decide_sql_request), the
  // rest of the body streams; a denial is ClickHouse's exception text. A
  // tunnel to one the guard does not terminate carries SQL it cannot read
  // (sql_unparseable). Empty: off.
  std::vector<HostMatcher> clickhouse_hosts;
};

// What the guard did, for its summary at exit.
struct GuardCounts {
  uint64_t requests = 0;    // decisions made (tunnels counted once)
  uint64_t allowed = 0;     // forwarded at once (monitor: whatever the verdict)
  uint64_t denied = 0;      // answered with a denial (enforce), at once or after a hold
  uint64_t held = 0;        // held for approval (enforce)
  uint64_t approved = 0;    // held, then approved
  uint64_t would_deny = 0;  // monitor: what enforce would have denied
  uint64_t would_hold = 0;  // monitor: what enforce would have held
  uint64_t llm_calls = 0;   // LLM calls whose answer was read
  uint64_t llm_in = 0;      // their input and output tokens
  uint64_t llm_out = 0;
};

class GuardJudge final : public RequestJudge {
 public:
  GuardJudge(std::shared_ptr<const GuardPolicy> policy, GuardJudgeOptions options);
  // Questions to the intent judge not yet asked are dropped (the one under
  // way ends within its timeout).
  ~GuardJudge() override;

  // Swaps the policy: a request is judged by the version it loaded at its
  // start, never by a mix. Held requests keep the verdict they were held under.
  void reload(std::shared_ptr<const GuardPolicy> policy);
  [[nodiscard]] std::shared_ptr<const GuardPolicy> policy() const { return policy_.load(); }
  [[nodiscard]] ApprovalQueue& approvals() { return approvals_; }
  // --approve-dangerous's "always allow": the command lines let run for the session.
  [[nodiscard]] ExecGrants& exec_grants() { return exec_grants_; }
  [[nodiscard]] GuardCounts counts() const;
  // An exec the exec gate flagged (--block-dangerous), in the activity log:
  // kind "exec", method "EXEC", the path run and its arguments as the path,
  // the verdict (deny: blocked, or what enforcing would block; approve: held;
  // allow: approved), the first risk's rule.
  void record_exec(const ExecJudgement& j, GuardVerdict verdict);
  // --integrity: a watched file created, modified or removed, in the activity
  // log (kind "integrity", method CREATED, MODIFIED or REMOVED, the file as
  // the path, verdict allow: nothing is stopped, rule "integrity"), and its
  // tamper risk for the circuit breaker; `what` is the finding for people.
  void record_integrity(const std::string& method, const std::string& path, const std::string& what);
  // --anomaly with --block-dangerous: an exec of a program not run during
  // the warm-up is flagged once (a log line, an activity line of kind
  // anomaly, method EXEC, the program as the path); --intent-firewall: an
  // off-mission exec is a finding (never stopped here). On the exec gate's thread.
  void note_exec(const ExecJudgement& j);
  // --approve-dangerous: the exec held in the approval queue (faultctl
  // approvals, faultcp), settled by a person or the timeout; its id.
  [[nodiscard]] std::string hold_exec(const ExecJudgement& j, ApprovalSettle settle);
  // The activity log (null: none) and identity, for a gate that judges by
  // this judge's policy (the Postgres gate) and records in the same chain.
  [[nodiscard]] const std::shared_ptr<ActivityWriter>& activity() const { return options_.activity; }
  [[nodiscard]] const std::string& identity() const { return options_.identity; }
  [[nodiscard]] const std::string& approval_prefix() const { return options_.approval_prefix; }

  // --creds: a request the guard let through whose credential cannot be set
  // (its secret missing, or plain HTTP): denied (rule "creds", whatever the
  // mode: never sent without it), its activity and log lines.
  [[nodiscard]] RequestVerdict deny_credential(const RequestHead& head, const std::string& why);

  // The circuit breaker tripped: every request from now on is denied (rule
  // circuit-breaker), whatever the policy and mode.
  void revoke(const std::string& why);
  [[nodiscard]] bool revoked() const { return revoked_.load(); }

  [[nodiscard]] RequestVerdict judge(const RequestHead& head, HeldRequest later) override;
  [[nodiscard]] RequestVerdict judge_body(uint64_t request_id, const RequestBodyChunk& chunk,
                                          HeldRequest later) override;
  void withdrawn(uint64_t request_id) override;
  void on_response_bytes(uint64_t request_id, std::string_view bytes, bool end) override;

  // One LLM call from its head to its answer's end.
  struct LlmCall;
  // One request's DLP scan, from its head to its body's end.
  struct DlpCall;
  // One ClickHouse request's SQL, from its head until it is settled.
  struct ClickHouseCall;

 private:
  [[nodiscard]] bool is_llm_call(const RequestHead& head) const;
  // The policy's decision on the facts, and what follows: a forward, a
  // denial, a hold. `call` is set for an LLM call.
  [[nodiscard]] RequestVerdict decide_request(const RequestHead& head, const RequestFacts& facts,
                                              const GuardPolicy& policy, HeldRequest later,
                                              std::shared_ptr<LlmCall> call, std::shared_ptr<DlpCall> dlp = nullptr,
                                              const SqlFacts* clickhouse = nullptr);
  // A request to a --clickhouse-host (plain HTTP, or inside a terminated
  // tunnel): its SQL reader, its query parameter read; null otherwise.
  [[nodiscard]] std::shared_ptr<ClickHouseCall> start_clickhouse(const RequestHead& head,
                                                                 std::shared_ptr<const GuardPolicy> policy) const;
  std::shared_ptr<ClickHouseCall> take_clickhouse(uint64_t id, bool erase);
  // The body of a ClickHouse request, piece by piece: more, or its decision
  // (with the DLP scan's, when one runs) once its SQL is settled.
  [[nodiscard]] RequestVerdict judge_clickhouse_body(const std::shared_ptr<ClickHouseCall>& ch,
                                                     const RequestBodyChunk& chunk, std::shared_ptr<DlpCall> dlp,
                                                     HeldRequest later);
  // The DLP scan of a head (its URL and headers), when --dlp or
  // --content-policy covers its host; null otherwise.
  [[nodiscard]] std::shared_ptr<DlpCall> start_dlp(const RequestHead& head, std::shared_ptr<const GuardPolicy> policy);
  std::shared_ptr<DlpCall> take_dlp(uint64_t id, bool erase);
  // --prompt-guard: the decision with the call's prompt findings applied
  // (deny, approve or monitor), and one prompt_injection line per finding.
  [[nodiscard]] GuardDecision judge_prompt(const RequestHead& head, const LlmCall& call, GuardDecision d, bool enforce);
  // --wasm-policy: the decision after the plugins (only one the rules did
  // not deny reaches them), and a finding line for each plugin that failed.
  [[nodiscard]] GuardDecision judge_wasm(const RequestHead& head, const RequestFacts& facts, GuardDecision d,
                                         bool enforce);
  // --scan-responses: the lines of an answer's threats (blocked: it was stopped).
  void record_response_threats(const RequestHead& head, const std::string& model,
                               const std::vector<ResponseThreat>& threats, bool blocked, bool enforce);
  // --receipts: the lines of an answer's claims.
  void record_receipts(const LlmCall& call);
  // --trace-tools: the activity and log lines of an answer's tool calls.
  void record_tool_calls(const LlmCall& call);
  // --anomaly (a tool not called in the warm-up) and --intent-firewall (an
  // off-mission tool call): an answer's tool calls.
  void note_tool_calls(const LlmCall& call);
  // --anomaly: one finding's activity line (kind anomaly) and log line.
  void record_anomaly(const std::string& method, const std::string& host, const std::string& path,
                      const std::string& said);
  // --intent-firewall: the call's first user turn, when no mission is known yet.
  void capture_mission(const LlmCall& call);
  // --intent-firewall: a request's judgement applied (deny or approve when
  // enforcing with --intent-action), and its finding line.
  [[nodiscard]] GuardDecision judge_request_intent(const RequestHead& head, GuardDecision d, bool enforce);
  // --intent-firewall: an action's judgement by the heuristic (nullopt: no
  // mission yet, or judged before); an unclear one is handed to the judge,
  // whose off-mission verdict is recorded later. `head`: the request, or the
  // model call a tool call came in; none for an exec.
  [[nodiscard]] std::optional<IntentJudgement> consider_action(const IntentAction& a, std::optional<RequestHead> head);
  // The finding: a request's line through record(), a tool call's or an
  // exec's its own (method TOOL or EXEC, the action as the path).
  void record_off_mission(const IntentAction& a, const std::optional<RequestHead>& head, GuardVerdict verdict,
                          const std::string& why, const std::string& then);
  // A text with the DLP detectors' findings masked (the --dlp or --trace-tools
  // engine; as it is without one): what a log line or the judge is shown.
  [[nodiscard]] std::string masked_text(std::string text) const;
  // A forward with findings: --dlp-action redact's rewrites (enforce), else
  // the finding's own activity line.
  void apply_dlp_forward(const RequestHead& head, const DlpCall& dlp, const std::vector<DlpFound>& found, bool enforce,
                         RequestVerdict& v);
  // A request the policy allows (or monitor lets through): for an LLM call
  // its budget and forward (forward_llm), then its decision's lines. `asked`
  // and `model_text`: the model the call asked for, on its decision's line.
  [[nodiscard]] RequestVerdict allow_request(const RequestHead& head, const GuardDecision& d, const std::string& why,
                                             const std::optional<ActivityLlm>& asked, const std::string& model_text,
                                             std::shared_ptr<LlmCall> call, bool enforce);
  // An LLM call allowed by the policy: the budget's admission, then the
  // forward with its rewrite, its usage reading and its stream filter.
  [[nodiscard]] RequestVerdict forward_llm(const std::shared_ptr<LlmCall>& call, bool enforce);
  // --replay: the call's recorded answer as an answer verdict, or nothing
  // (then a recording is started when the call can be keyed).
  [[nodiscard]] std::optional<RequestVerdict> replay_or_record(const std::shared_ptr<LlmCall>& call, bool filter);
  // The lines that follow an LLM call's allow line: its route, its replay.
  void record_llm_extras(const RequestHead& head, const LlmCall& call);
  // --replay, a miss's answer at its end: kept when it is a whole 2xx answer.
  void save_recording(LlmCall& call);
  [[nodiscard]] std::string store_flag() const;  // "--replay" or "--cache", for the lines
  std::shared_ptr<LlmCall> take_call(uint64_t id);
  void drop_call(uint64_t id);

  // The activity line and the log line of one decision.
  // `llm`: the call's model and tokens (kind "llm": its usage line); `what`
  // "" logs nothing for people; `reason`: the line's reason field (masked
  // here, redacted by the writer; "" writes none).
  void record(const RequestHead& head, GuardVerdict verdict, const std::string& rule, const std::string& what,
              std::optional<ActivityLlm> llm = std::nullopt, std::string_view kind = "request",
              const std::string& reason = "");
  // The reason a decision's activity line carries: a WebAssembly plugin's
  // (rules wasm:NAME and wasm-policy) and a dlp-block's (the types only);
  // "" for the rest, whose reason is the operator's own rule text.
  [[nodiscard]] static std::string activity_reason(const GuardDecision& d);

  std::atomic<std::shared_ptr<const GuardPolicy>> policy_;
  GuardJudgeOptions options_;
  std::atomic<uint64_t> requests_{0}, allowed_{0}, denied_{0}, held_{0}, approved_{0}, would_deny_{0}, would_hold_{0};
  // A tunnel's CONNECT host by the client's address, so that its SNI is judged
  // again only when it names another host (one tunnel, one decision).
  std::mutex tunnels_mu_;
  std::map<std::string, std::string> tunnel_hosts_;
  std::mutex calls_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<LlmCall>> calls_;
  std::mutex dlp_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<DlpCall>> dlp_calls_;
  std::mutex clickhouse_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<ClickHouseCall>> clickhouse_calls_;
  std::atomic<uint64_t> llm_calls_{0}, llm_in_{0}, llm_out_{0};
  ExecGrants exec_grants_;
  std::atomic<bool> revoked_{false};
  std::mutex revoked_mu_;
  std::string revoked_why_;
  // The breaker's points for a finding (nothing when it is off).
  void risk(RiskKind kind, const std::string& what);
  // A request after the breaker tripped: its denial.
  [[nodiscard]] RequestVerdict revoked_answer(const RequestHead& head);
  // Last, so destroyed first: its destructor settles what is left, and the
  // settle callbacks use the members above (counters, calls_, the log).
  ApprovalQueue approvals_;
  // Reserves of a budget that waits on the network (BudgetStore::waits()),
  // off the proxy's worker; null otherwise. Destroyed before everything its
  // tasks use (it runs what is queued, then ends).
  std::unique_ptr<TaskThread> budget_thread_;
  // --intent-firewall with a judge: its questions, one at a time, off the
  // proxy's workers. Destroyed first (its tasks use everything above).
  std::atomic<bool> intent_stopping_{false};
  std::unique_ptr<TaskThread> intent_thread_;
};

// The facts the policy decides on, from a head.
[[nodiscard]] RequestFacts request_facts(const RequestHead& head);

// Whose error format a denial takes: a model provider's (a known model host,
// or a model API path such as /v1/messages or /v1/chat/completions), else plain.
[[nodiscard]] DenialFormat denial_format_for_request(std::string_view host, std::string_view path,
                                                     bool has_anthropic_version);

}  // namespace faultline
