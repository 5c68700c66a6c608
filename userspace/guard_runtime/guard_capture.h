// The request guard of `faultctl guard` (issue 26) and of faultd's gateway
// (--guard-gateway): a forward proxy in this process on 127.0.0.1 (or the
// gateway's address) judged by a GuardJudge, the variables that point the
// command at it (and with --terminate-tls at the local CA), the approvals
// socket, the activity log, SIGHUP's reload and the summary at exit.
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/guard/approval_socket.h"
#include "userspace/guard/credential_store.h"
#include "userspace/guard/guard_judge.h"
#include "userspace/guard/honeytokens.h"
#include "userspace/guard/kubeconfig.h"
#include "userspace/guard_runtime/guard_gateway.h"
#include "userspace/guard_runtime/guard_proctor.h"
#include "userspace/net/egress_rules.h"
#include "userspace/proxy/proxy_registry.h"

namespace faultline {
class GuardActivityReporter;
class GuardApprovalRelay;
class GuardPolicySync;
}  // namespace faultline

namespace faultline {

struct GuardCaptureOptions {
  GuardPolicy policy;
  std::string policy_file;  // reloaded on SIGHUP when set (its guard section)
  std::string identity;
  bool terminate_tls = false;
  std::string upstream_ca;  // --upstream-ca: roots the upstreams may also chain to
  std::chrono::milliseconds approve_timeout{120'000};
  std::string json_log;  // the activity log; "" for none
  bool no_proxy_loopback = false;
  std::string command;  // for the approvals API ("curl")
  // As root: the proxy also takes the command's TCP connections the kernel
  // redirects to it (redirects()), judged by what they carry (Host, SNI, or
  // their destination alone). A second listener on [::1] takes IPv6 ones.
  bool transparent = false;
  // --gateway: the proxy listens on `listen` for agents on other hosts, each
  // request must carry one of the tokens (407 otherwise) and is judged as the
  // token's identity; the CA is served at /__faultline/ca.crt without one.
  bool gateway = false;
  std::string listen;  // "" for 127.0.0.1:0
  std::vector<GatewayToken> gateway_tokens;
  // A predecessor's listening sockets of the gateway (faultd's SIGHUP
  // restart): the proxy is made on them instead of binding `listen`, so no
  // connection is refused. start() owns them from the call on.
  std::vector<int> inherited_listeners;
  // Where the runtime's lines go once started (the workers, the reporter, the
  // relay...): one line each, no newline. Empty: stderr, one write a line.
  std::function<void(const std::string&)> line_log;
  // The LLM layer (docs/guard.md, "LLM facts, usage and budgets").
  std::vector<std::string> llm_hosts;                         // --llm-host
  std::vector<LlmModelRoute> routes;                          // --route-model
  CacheOptimizeMode optimize_cache = CacheOptimizeMode::off;  // --optimize-cache
  LlmBudgetLimits budget;                // --llm-token-budget, --llm-request-budget, --llm-budget-window, ...
  std::optional<ProctorConfig> proctor;  // FAULTLINE_PROCTOR_*: reviews held requests first
  bool budget_shared = false;            // --llm-budget-shared: faultcp keeps it (RemoteBudgetStore)
  std::string replay_dir;                // --replay DIR: record then replay LLM answers ("" off)
  std::optional<std::chrono::milliseconds> cache_ttl;  // --cache [--cache-ttl D]: in memory
  std::optional<double> cache_threshold;               // --cache-mode similar [--cache-threshold S]
  GuardDlpOptions dlp;                                 // --dlp, --content-policy (docs/detectors.md)
  GuardPromptOptions prompt;                           // --prompt-guard (docs/detectors.md)
  std::shared_ptr<const DlpEngine> trace_tools;        // --trace-tools: masks the arguments (null: off)
  GuardResponseOptions responses;                      // --scan-responses, --block-responses
  // --honeytokens: the decoys (their rules are in dlp.engine), planted in the
  // command's environment and a decoy credentials file. Null: off.
  std::shared_ptr<const HoneytokenSet> honeytokens;
  std::shared_ptr<CircuitBreaker> breaker;               // --circuit-breaker (null: off)
  std::shared_ptr<AnomalyWatch> anomaly;                 // --anomaly (null: off)
  std::vector<std::shared_ptr<const WasmPolicy>> wasm;   // --wasm-policy, in order (empty: off)
  bool wasm_fail_closed = false;                         // --wasm-fail-closed
  std::vector<HostMatcher> clickhouse_hosts;             // --clickhouse-host (empty: off)
  std::shared_ptr<MirrorWatch> mirror;                   // --mirror (null: off)
  std::shared_ptr<IntentFirewall> intent;                // --intent-firewall (null: off)
  IntentEnforce intent_action = IntentEnforce::monitor;  // --intent-action
  std::shared_ptr<const ResponseGuard> receipts;         // --receipts (null: off)
  // --creds FILE: headers set on the forwarded requests to its hosts, the
  // secrets read at start (env ones removed from the command's environment)
  // and again every creds_ttl.
  std::optional<CredsFile> creds;
  std::chrono::milliseconds creds_ttl{30'000};
  // --k8s-kubeconfig FILE: the command's KUBECONFIG is a copy trusting the
  // guard's CA with no credentials; the guard sets the user's Authorization
  // (with the --creds entries, refreshed every creds_ttl) and presents its
  // client certificate, verifying the server as the kubeconfig says.
  std::optional<KubeconfigUse> kubeconfig;
  // With faultcp (--control-plane URL --token T): the workspace's guard
  // section is the policy, held requests are posted there too, and the
  // activity goes there, spooled in state_dir while faultcp is down.
  std::string cp_url;
  std::string cp_token;
  std::string state_dir;  // --state-dir, else guard_state_dir()
};

class GuardCapture {
 public:
  [[nodiscard]] static Result<std::unique_ptr<GuardCapture>> start(GuardCaptureOptions options, std::ostream& log);
  ~GuardCapture();
  GuardCapture(const GuardCapture&) = delete;
  GuardCapture& operator=(const GuardCapture&) = delete;

  // The command's variables: the proxy's four, NO_PROXY, and the CA's.
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& env() const { return env_; }
  [[nodiscard]] uint16_t proxy_port() const { return port_; }
  [[nodiscard]] const std::string& proxy_address() const { return address_; }
  // With transparent: every TCP destination to the proxy's listener of its
  // family (for the kernel's side; an IPv6 one only when [::1] could be bound).
  [[nodiscard]] const std::vector<RedirectRule>& redirects() const { return redirects_; }
  [[nodiscard]] GuardJudge& judge() { return *judge_; }
  // Re-reads the policy file (SIGHUP): the new guard section, or one line
  // naming the error while the old policy stays.
  void reload();
  void print_summary(std::ostream& log) const;

  // A restart's handover (faultd): duplicates of the proxy's listening
  // sockets, for a successor's inherited_listeners; release_listeners(): this
  // guard stops accepting (the successor does) and keeps the connections it
  // has, which open_connections() counts down as they close.
  [[nodiscard]] Result<std::vector<UniqueFd>> listeners() const;
  void release_listeners();
  [[nodiscard]] uint64_t open_connections() const;

 private:
  GuardCapture() = default;
  // --honeytokens: the decoys in env_ and a decoy credentials file (decoy_dir_).
  [[nodiscard]] Status plant_honeytokens(const HoneytokenSet& set, std::ostream& log);
  GuardCaptureOptions options_;
  std::optional<TempFolder> trust_dir_;
  std::optional<TempFolder> decoy_dir_;  // --honeytokens: the decoy credentials file
  // Declared before the judge: the judge (its activity writer, its queue's
  // last settles) goes first, then these, each stopped in ~GuardCapture.
  std::unique_ptr<GuardActivityReporter> reporter_;
  std::shared_ptr<ActivityWriter> activity_;  // the judge's too; flushed before the reporter stops
  std::shared_ptr<GuardApprovalRelay> relay_;
  std::shared_ptr<GuardJudge> judge_;
  std::unique_ptr<GuardPolicySync> policy_sync_;
  std::unique_ptr<ApprovalSocket> approvals_;
  std::shared_ptr<LocalBudgetStore> budget_;  // the local budget (flushed at the end)
  std::shared_ptr<GuardProctor> proctor_;
  std::shared_ptr<BudgetStore> shared_budget_;  // --llm-budget-shared
  std::shared_ptr<CredentialStore> creds_;      // --creds (null: off)
  std::unique_ptr<ProxyRegistry> proxies_;
  uint16_t port_ = 0;
  std::string address_;
  std::vector<RedirectRule> redirects_;
  std::vector<std::pair<std::string, std::string>> env_;
  // SIGHUP: the handler writes to reload_pipe_[1]; reload_thread_ reads it
  // and reloads, until reload_stop_ is written (the destructor joins it first).
  UniqueFd reload_pipe_[2];
  UniqueFd reload_stop_;
  std::thread reload_thread_;
};

// The guard section of a policy file: a Policy's spec.guard, or the bare
// {mode, default_allow, rules}. Errors are one line with file:line:column.
[[nodiscard]] Result<GuardPolicy> read_guard_policy_file(const std::string& file);

// Why a policy cannot run as given: a rule needing plaintext without
// --terminate-tls (a path, a method, or an LLM call's facts). Nothing when it can.
[[nodiscard]] Status check_guard_policy_runnable(const GuardPolicy& policy, bool terminate_tls);

// The CA folder of a guard that terminates TLS: FAULTLINE_CA_DIR, else root's
// (/var/lib/faultline/ca), else the user's $XDG_DATA_HOME/faultline/ca, else
// ~/.local/share/faultline/ca when HOME is ours, else the runtime folder's ca/
// (where the approvals sockets are).
[[nodiscard]] std::string guard_ca_dir();

// Where a guard keeps what outlives it: the LLM budget's window, and with
// faultcp the activity spool, the default activity log and the last workspace
// policy. FAULTLINE_STATE_DIR, else /var/lib/faultline/guard for root, else
// $XDG_STATE_HOME/faultline/guard, else ~/.local/state/faultline/guard when
// HOME is ours, else the runtime folder's state/ (where the approvals sockets are).
[[nodiscard]] std::string guard_state_dir();

}  // namespace faultline
