// The guard's policy (mode, default, rules) and its one decision: what a
// request's facts get, whatever protocol carried it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "userspace/guard/guard_rule.h"
#include "userspace/guard/k8s_facts.h"
#include "userspace/guard/sql_facts.h"

struct hs_database;

namespace faultline {

// Monitor decides and records; enforce also acts on the verdict.
enum class GuardMode : uint8_t { Monitor, Enforce };

// The rules of one policy by the host they name, so that decide() reads only
// the rules a request's host can meet: those naming exactly its host, those
// naming a suffix of it (*.example.com), and those naming no host. Of the
// last, the ones naming a path are read only when the request's path holds
// it: their distinct paths are one Hyperscan literal database, scanned once
// per request. Each list keeps the order written, and decide() walks them
// merged, so a decision is the one the plain walk over every rule gives (a
// test holds the two equal).
class GuardRuleIndex {
 public:
  // Rule positions by action (GuardVerdict), each in the order written.
  using Positions = std::array<std::vector<uint32_t>, 3>;

  explicit GuardRuleIndex(const std::vector<GuardRule>& rules);
  ~GuardRuleIndex();
  GuardRuleIndex(const GuardRuleIndex&) = delete;
  GuardRuleIndex& operator=(const GuardRuleIndex&) = delete;

  // Whether this index was built for this very vector (a copy of a policy
  // carries its index but not its vector: decide() then walks every rule).
  [[nodiscard]] bool covers(const std::vector<GuardRule>& rules) const {
    return rules.data() == rules_ && rules.size() == count_;
  }
  // The host-less rules whose path `path` holds, by action (all of them when
  // Hyperscan cannot scan: the index never hides a rule that may match).
  void rules_on_path(std::string_view path, Positions& out) const;
  // Calls visit(position) for each rule of `action` that may match a request
  // to `host` (canonical_guard_host()) whose path's rules are `on_path`
  // (rules_on_path()), in the order written, until visit returns true.
  template <class Visit>
  void visit(GuardVerdict action, std::string_view host, const Positions& on_path, Visit&& visit) const;
  // How many host-less path rules the path database holds (0: none, or
  // Hyperscan is not usable here and they are read for every request).
  [[nodiscard]] size_t path_rules() const { return path_db_ ? path_rule_count_ : 0; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using ByHost = std::unordered_map<std::string, Positions, Hash, std::equal_to<>>;
  // Fills `out` with the lists of `action` a request to `host` may meet: its
  // exact host's, each of its suffixes' and the host-less rules'; their count.
  size_t lists_for(GuardVerdict action, std::string_view host, const Positions& on_path,
                   std::vector<const std::vector<uint32_t>*>& out) const;

  const GuardRule* rules_;
  size_t count_;
  ByHost exact_;        // "api.example.com" -> rules naming exactly it
  ByHost wildcard_;     // "example.com" -> rules naming *.example.com
  Positions any_host_;  // rules naming no host and no path (a method, MCP, SQL, ...), or every host-less
                        // rule when there is no path database
  // The host-less rules naming a path: by the id of their path in path_db_.
  std::vector<Positions> by_path_;
  Positions path_all_;  // all of them, for a scan that cannot run
  size_t path_rule_count_ = 0;
  hs_database* path_db_ = nullptr;
  uint64_t path_db_serial_ = 0;
};

struct GuardPolicy {
  GuardMode mode = GuardMode::Monitor;
  bool default_allow = true;
  std::vector<GuardRule> rules;  // in the order written; decide() takes them by action
  // Built by with_rule_index() for a policy that is shared and no longer
  // changes; without it, decide() walks every rule.
  std::shared_ptr<const GuardRuleIndex> index;
};

// The policy with its rule index built (a copy; the policy itself when it has
// one already). What a guard judges by: 1,000 rules cost a request the few
// that name its host, not all of them.
[[nodiscard]] std::shared_ptr<const GuardPolicy> with_rule_index(std::shared_ptr<const GuardPolicy> policy);

// What a session knows of one request when it asks for a decision.
struct RequestFacts {
  std::string method;  // "GET"; "CONNECT" for a tunnel the guard does not terminate
  std::string host;    // without the port ("api.example.com", "10.0.0.5", "::1")
  uint16_t port = 0;
  std::string path;  // the request target's path and query; empty when unseen
  bool tls_terminated = false;
  std::optional<std::string> llm_model;
  std::optional<uint64_t> llm_max_tokens;
  // The request went to an LLM endpoint but its body is not JSON, so the LLM
  // facts are unknown (not merely absent).
  bool llm_facts_unparseable = false;
  // The DLP engine's findings in scope (--dlp, --dlp-host): their types,
  // each once, in the order found.
  std::vector<std::string> dlp_findings;
  // An MCP tools/call (faultctl mcp-guard) rather than an HTTP request: only
  // rules with an MCP matcher judge it (and only they, no HTTP request).
  bool mcp = false;
  std::string mcp_tool;
  const nlohmann::json* mcp_arguments = nullptr;  // the call's params.arguments; null when it has none
  // A SQL statement over the Postgres wire: only rules with a SQL matcher
  // judge it. Null for anything else.
  const SqlStatementFacts* sql = nullptr;
  // A Kubernetes API resource request (its path under /api or /apis): the
  // facts rules with a k8s_* matcher judge. Unset for any other path.
  std::optional<K8sRequestFacts> k8s;
};

struct GuardDecision {
  GuardVerdict verdict = GuardVerdict::Allow;
  std::string rule;                // the rule's name; "" when the default decided
  std::string reason;              // the rule's reason, the default's, or why unknown facts matched
  bool enforced = false;           // the policy enforces (else the verdict is reported only)
  bool llm_facts_unknown = false;  // the rule matched because its LLM facts were unknown
  bool k8s = false;                // the deciding rule has a Kubernetes matcher
};

// The decision: every deny rule first, then approve, then allow, in the order
// written within each action; the first that matches decides, else the
// default. Matchers of a rule are ANDed.
//
// Unknown LLM facts fail safe: when the body of an LLM request is not JSON
// (llm_facts_unparseable), a deny or approve rule whose llm_model or
// llm_max_tokens_over cannot be checked counts as matching (its other
// matchers still must), and the reason says so; an allow rule never matches
// on unknown facts. A rule that matches on the facts it can check is
// preferred to one matching only on unknown facts. This holds in monitor mode
// too, so that monitor reports what enforce would do.
//
// A SQL statement (facts.sql) has lists (verbs, tables, functions): a deny
// or approve rule's matcher matches when any of the list does, an allow
// rule's only when every one does (and the list is not empty), so that
// `INSERT INTO a SELECT ...` is not let through by an allow rule for SELECT.
//
// A Kubernetes request whose path the guard cannot read (facts.k8s->unknown)
// fails safe the same way: a deny or approve rule with a k8s_* matcher
// matches it (its HTTP matchers still must), an allow rule never does.
//
// A tunnel seen only by its host (not terminated, no path) never matches a
// rule that needs the path or the method: the caller refuses such rules at
// start for HTTPS it does not terminate (needs_plaintext()).
//
// With the policy's rule index (with_rule_index()), an HTTP request is
// matched against the rules its host can meet only; the decision is the same.
[[nodiscard]] GuardDecision decide(const GuardPolicy& policy, const RequestFacts& facts);

// A request that carries SQL (ClickHouse over HTTP, clickhouse_sql.h): each
// statement judged as the Postgres gate judges one (decide() with
// facts.sql: the SQL rules, then the default), and the request's decision
// the strictest of `http` (decide() on its HTTP facts) and the statements':
// a deny, else an approve, else `http`. SQL that cannot be read (sql.parsed
// false) is denied by the rule kSqlRuleUnparseable. A decision by a rule
// without a reason names the statement's verb and tables.
[[nodiscard]] GuardDecision decide_sql_request(const GuardPolicy& policy, const SqlFacts& sql, GuardDecision http);

// The rule that denies SQL the guard cannot read (Postgres and ClickHouse).
inline constexpr std::string_view kSqlRuleUnparseable = "sql_unparseable";

// The reason given when a rule matched on unknown LLM facts.
inline constexpr std::string_view kLlmFactsUnknownReason = "llm facts unknown: body is not JSON";
// The reason given when a rule matched on a Kubernetes path it cannot read.
inline constexpr std::string_view kK8sFactsUnknownReason =
    "kubernetes facts unknown: the path is not one the guard reads as the API server would";

template <class Visit>
void GuardRuleIndex::visit(GuardVerdict action, std::string_view host, const Positions& on_path, Visit&& visit) const {
  thread_local std::vector<const std::vector<uint32_t>*> lists;
  thread_local std::vector<size_t> at;
  const size_t n = lists_for(action, host, on_path, lists);
  at.assign(n, 0);
  for (;;) {  // the smallest position at the head of any list, until all are read
    size_t best = n;
    for (size_t i = 0; i < n; ++i)
      if (at[i] < lists[i]->size() && (best == n || (*lists[i])[at[i]] < (*lists[best])[at[best]])) best = i;
    if (best == n) return;
    if (visit((*lists[best])[at[best]++])) return;
  }
}

}  // namespace faultline
