// The request guard of `faultctl guard` (issue 26): a forward proxy in this
// process on 127.0.0.1 judged by a GuardJudge, the variables that point the
// command at it (and with --terminate-tls at the local CA), the approvals
// socket, the activity log, SIGHUP's reload and the summary at exit.
#pragma once

#include <chrono>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/result.h"
#include "userspace/guard/approval_socket.h"
#include "userspace/guard/guard_judge.h"
#include "userspace/proxy/proxy_registry.h"

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
  // The LLM layer (docs/guard.md, "LLM facts, usage and budgets").
  std::vector<std::string> llm_hosts;  // --llm-host
  std::vector<LlmModelRoute> routes;   // --route-model
  LlmBudgetLimits budget;              // --llm-token-budget, --llm-request-budget, --llm-budget-window, ...
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
  [[nodiscard]] GuardJudge& judge() { return *judge_; }
  // Re-reads the policy file (SIGHUP): the new guard section, or one line
  // naming the error while the old policy stays.
  void reload();
  void print_summary(std::ostream& log) const;

 private:
  GuardCapture() = default;
  GuardCaptureOptions options_;
  std::optional<TempFolder> trust_dir_;
  std::shared_ptr<GuardJudge> judge_;
  std::unique_ptr<ApprovalSocket> approvals_;
  std::shared_ptr<LocalBudgetStore> budget_;
  std::unique_ptr<ProxyRegistry> proxies_;
  uint16_t port_ = 0;
  std::vector<std::pair<std::string, std::string>> env_;
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

// Where the guard keeps state across restarts (the LLM budget's window):
// FAULTLINE_STATE_DIR, else root's /var/lib/faultline, else
// $XDG_STATE_HOME/faultline, else ~/.local/state/faultline when HOME is ours,
// else the runtime folder.
[[nodiscard]] std::string guard_state_dir();

}  // namespace faultline
