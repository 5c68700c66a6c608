// The MCP guard's session: every line between an agent (the client) and one
// MCP server, judged. tools/call goes through the guard's rules (deny,
// approve, allow, default), the pins of the server's tools and --dry-run;
// tools/list answers are checked against the pins (a changed or new tool is
// hidden when enforcing); everything else passes. No I/O of its own: the
// caller feeds lines and gives the two writers (ctl/commands/mcp_guard.cpp).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "userspace/guard/activity_log.h"
#include "userspace/guard/approval_queue.h"
#include "userspace/guard/guard_policy.h"
#include "userspace/guard/mcp_finance.h"
#include "userspace/guard/mcp_finance_ledger.h"
#include "userspace/guard/mcp_pins.h"
#include "userspace/guard/mcp_wire.h"

namespace faultline {

struct McpGateOptions {
  std::string server_name;  // the pins' key and the activity lines' host
  std::string identity;
  // The identity of the activity lines' chain; "" for `identity`. A guard
  // reporting to faultcp writes a chain of its own per server (one writer per
  // chain), "IDENTITY/mcp:SERVER" (mcp_chain_identity()).
  std::string activity_identity;
  bool dry_run = false;         // calls to tools not annotated read-only are answered "would execute", not sent
  std::string approval_prefix;  // the approvals' ids ("<pid>") and denial ids ("mcp_<pid>_<n>")
  std::chrono::milliseconds approve_timeout{120'000};
  std::shared_ptr<ActivityWriter> activity;  // may be null
  std::shared_ptr<McpPinStore> pins;         // may be null: no pins
  // --inspect-actions: each tools/call classified into a finance action
  // (mcp_finance.h), its facts logged and the limits judged on it, the
  // orders sent kept in the ledger (null: one in memory).
  bool inspect_actions = false;
  FinanceLimits finance_limits;
  std::shared_ptr<FinanceLedger> finance_ledger;
  std::function<void(const std::string&)> log;  // one line of stderr, without its newline
  // The two directions: each takes one line without its newline. Called from
  // the thread that fed the line, or an approval's; each must be thread-safe.
  std::function<void(const std::string&)> to_server;
  std::function<void(const std::string&)> to_client;
};

// The activity chain of one guarded server for an identity: "alice@laptop/mcp:server-everything".
[[nodiscard]] std::string mcp_chain_identity(const std::string& identity, const std::string& server);

struct McpGateCounts {
  uint64_t calls = 0, allowed = 0, denied = 0, held = 0, approved = 0, would_deny = 0, would_hold = 0, dry_run = 0,
           rug_pulls = 0, bad_lines = 0;
};

// The text of a blocked call's result: "blocked by faultline: RULE: REASON"
// (RULE "default" when no rule matched).
[[nodiscard]] std::string mcp_blocked_text(const std::string& rule, const std::string& reason);

class McpGate {
 public:
  McpGate(McpGateOptions options, GuardPolicy policy);
  ~McpGate();  // settles what is held (timed out) before the writers go
  McpGate(const McpGate&) = delete;
  McpGate& operator=(const McpGate&) = delete;

  // A line from the client (an oversized one is refused with -32600).
  void from_client(const McpLineReader::Line& line);
  // A line from the server.
  void from_server(const McpLineReader::Line& line);
  [[nodiscard]] ApprovalQueue& approvals() { return *approvals_; }
  [[nodiscard]] McpGateCounts counts() const;
  [[nodiscard]] std::shared_ptr<const GuardPolicy> policy() const { return policy_.load(); }
  // A new policy (SIGHUP): calls judged from now on use it; a held call keeps
  // its verdict.
  void reload(GuardPolicy policy) { policy_.store(std::make_shared<const GuardPolicy>(std::move(policy))); }

 private:
  // What the gate knows of one tool from the server's lists.
  struct Tool {
    std::string hash;
    bool read_only = false;
    bool output_schema = false;  // a result must then carry structuredContent unless isError
    PinState pin = PinState::Pinned;
    [[nodiscard]] bool hidden() const { return pin == PinState::Changed || pin == PinState::New; }
  };
  void on_call(const McpMessage& m, const std::string& line);
  // The rules' decision with the finance limits on the call's action: a deny
  // stands, else the limits' deny or hold wins.
  [[nodiscard]] GuardDecision with_finance(GuardDecision d, const FinanceAction& a);
  // The call goes to the server: an order is recorded in the ledger.
  void send_call(const std::string& line, const FinanceAction& a);
  // A tools/list result: pins checked, findings logged; when enforcing, the
  // changed and new tools are removed. Returns the result as it goes on.
  nlohmann::json check_tools(nlohmann::json result);
  void refresh_tools(const std::string& cursor);  // list_changed: the gate's own tools/list
  void record(std::string_view kind, std::string_view method, const std::string& tool, GuardVerdict v,
              const std::string& rule);
  void say(const std::string& text) const;
  [[nodiscard]] bool enforcing() const { return policy_.load()->mode == GuardMode::Enforce; }

  McpGateOptions options_;
  std::atomic<std::shared_ptr<const GuardPolicy>> policy_;
  mutable std::mutex mu_;
  std::map<std::string, Tool> tools_;   // by name, from the last lists
  std::set<std::string> client_lists_;  // the ids (dumped) of the client's tools/list requests
  std::set<std::string> own_lists_;     // the ids of the gate's own
  uint64_t next_own_ = 0;
  std::atomic<uint64_t> next_call_{0};
  struct AtomicCounts {
    std::atomic<uint64_t> calls{0}, allowed{0}, denied{0}, held{0}, approved{0}, would_deny{0}, would_hold{0},
        dry_run{0}, rug_pulls{0}, bad_lines{0};
  } counts_;
  // Last: destroyed first, settling what is held while the rest still stands.
  std::unique_ptr<ApprovalQueue> approvals_;
};

}  // namespace faultline
