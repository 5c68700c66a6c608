// One rule of the AI-agent guard: what a request must look like (host, path,
// method, LLM facts, all ANDed) and what the guard does with it; plus the
// `--allow/--deny/--approve P` patterns of the command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "userspace/guard/mcp_rule.h"
#include "userspace/net/egress_rules.h"

namespace faultline {

// What the guard does with a request. Deny and approve are final answers
// (approve holds the request until a person, or the timeout, decides).
enum class GuardVerdict : uint8_t { Allow, Deny, Approve };

[[nodiscard]] std::string_view guard_verdict_name(GuardVerdict v);  // "allow", "deny", "approve"
[[nodiscard]] std::optional<GuardVerdict> guard_verdict_from_name(std::string_view name);

// A host as a rule names it: "api.example.com" (exactly that name),
// "*.example.com" (its strict subdomains: a.example.com, a.b.example.com; not
// example.com, not badexample.com), either with ":PORT" (only that port).
// Names compare case-insensitively, without a trailing dot.
struct HostMatcher {
  std::string name;  // lowercase; for a wildcard, the suffix without "*."
  bool wildcard = false;
  std::optional<uint16_t> port;

  [[nodiscard]] bool matches(std::string_view host, uint16_t request_port) const;
  // The same for a host already canonical (canonical_guard_host()): a policy
  // judges one request against many rules, so it canonicalises once.
  [[nodiscard]] bool matches_canonical(std::string_view canonical, uint16_t request_port) const;
  [[nodiscard]] std::string text() const;  // as it would be written back
};

// A request's host as rules compare it: lowercase, no brackets around an IPv6
// literal, no trailing dot.
[[nodiscard]] std::string canonical_guard_host(std::string_view host);

// "api.example.com", "*.example.com", "api.example.com:8443", "10.0.0.5",
// "[::1]:443". An error says why (the caller prefixes the field or flag).
[[nodiscard]] Result<HostMatcher> parse_host_matcher(std::string_view text);

struct GuardRule {
  std::string name;
  GuardVerdict action = GuardVerdict::Deny;
  std::string reason;
  // The matchers; an unset one matches anything. A rule has one at least.
  std::optional<HostMatcher> host;
  std::string path;       // a substring of the request target (path and query)
  std::string method;     // uppercase; compared case-insensitively
  std::string llm_model;  // the request's model, exactly, or a prefix when it ends in '*' ("claude-opus-*")
  std::optional<uint64_t> llm_max_tokens_over;  // the request asks for more output tokens than this
  // The DLP engine found a secret of this type in the request (its URL,
  // headers or body): a detector's name ("aws_access_key") or "any".
  std::string dlp_type;
  // An MCP tools/call (faultctl mcp-guard): the tool's name (a glob) and
  // matchers on its arguments, ANDed. A rule with either judges MCP calls
  // only; a rule without judges HTTP requests only.
  std::string mcp_tool;
  std::vector<McpArgMatcher> mcp_args;
  // A SQL statement over the Postgres wire (faultctl guard --pg-listen): its
  // verb (uppercase: DROP), a table it names and a function it calls (globs;
  // sql_table_matches()), ANDed. A rule with any judges SQL only.
  std::string sql_verb;
  std::string sql_table;
  std::string sql_function;
  // A Kubernetes API request (k8s_facts.h), ANDed with the HTTP matchers
  // above: its RBAC verb (get, list, watch, create, update, patch, delete,
  // deletecollection, proxy; "*" any), its resource ("secrets", "pods/exec",
  // "deployments.apps"), namespace and name (globs, lowercase; compared
  // case-insensitively). A rule with any judges only requests whose path is
  // a Kubernetes resource path.
  std::string k8s_verb;
  std::string k8s_resource;
  std::string k8s_namespace;
  std::string k8s_name;

  [[nodiscard]] bool has_matcher() const;
  [[nodiscard]] bool is_mcp() const { return !mcp_tool.empty() || !mcp_args.empty(); }
  [[nodiscard]] bool is_sql() const { return !sql_verb.empty() || !sql_table.empty() || !sql_function.empty(); }
  [[nodiscard]] bool is_k8s() const {
    return !k8s_verb.empty() || !k8s_resource.empty() || !k8s_namespace.empty() || !k8s_name.empty();
  }
  [[nodiscard]] bool needs_llm_facts() const { return !llm_model.empty() || llm_max_tokens_over.has_value(); }
};

// A SQL verb as a rule names it: letters only, uppercased ("drop" -> "DROP").
[[nodiscard]] Result<std::string> parse_sql_verb(std::string_view text);
// A table or function glob ('*', '?'; 1-128 characters, no spaces or control
// characters), lowercased: names compare case-insensitively.
[[nodiscard]] Result<std::string> parse_sql_glob(std::string_view text);
// A table or function name against a rule's glob: a glob with a '.' matches
// the name as written ("prod.*" matches prod.users, not users); a glob
// without one matches its last part, whatever the schema ("users" matches
// users and prod.users). Case-insensitive.
[[nodiscard]] bool sql_name_matches(std::string_view glob, std::string_view name);

// A Kubernetes RBAC verb as a rule names it, lowercased: get, list, watch,
// create, update, patch, delete, deletecollection, proxy, or '*' (any).
[[nodiscard]] Result<std::string> parse_k8s_verb(std::string_view text);
// A Kubernetes resource, namespace or name glob ('*', '?'; 1-253 characters,
// no spaces or control characters), lowercased. `what` names it in the error.
[[nodiscard]] Result<std::string> parse_k8s_glob(std::string_view text, std::string_view what);

// `--k8s-deny`, `--k8s-approve`, `--k8s-allow`: 'VERB RESOURCE [NAME] [-n NAMESPACE]',
// kubectl's order ('delete secrets -n prod', 'create pods/exec',
// 'get configmaps app-config -n dev'); '*' for any verb or resource. The rule
// is named after the flag and the pattern. `flag` names the flag in the error.
[[nodiscard]] Result<GuardRule> parse_k8s_pattern(GuardVerdict action, std::string_view flag, std::string_view pattern);

// A rule that needs what only the request's bytes say (its path, method or
// LLM facts): on HTTPS these are seen only with TLS terminated, so the caller
// refuses such a rule at start when it does not terminate TLS.
[[nodiscard]] bool needs_plaintext(const GuardRule& rule);

// An HTTP method as a rule names it: letters only, uppercased ("post" -> "POST").
[[nodiscard]] Result<std::string> parse_method(std::string_view text);

// A CIDR pattern of the command line: the kernel judges it by address (an
// egress rule of the cgroup), not the guard by request.
struct CidrPattern {
  EgressRule rule;
};

// `--allow P`, `--deny P`, `--approve P`:
//   /secrets/                 a path substring (a pattern with '/')
//   api.example.com           a host: exact, *.suffix, host:port
//   api.example.com/v1/       a host and a path substring
//   'POST /v1/prod/'          an optional method first ('POST', 'DELETE *.example.com')
//   POST                      a method alone
//   10.0.0.0/8, 10.0.0.5:443  a CIDR (v4 or v6, with the kernel rule's port and
//                             protocol forms): returned as a CidrPattern
// The rule is named after the flag and the pattern ("--deny /secrets/"). A bad
// pattern is one error line naming the flag and the pattern.
using CliPattern = std::variant<GuardRule, CidrPattern>;
[[nodiscard]] Result<CliPattern> parse_cli_pattern(GuardVerdict action, std::string_view pattern);

}  // namespace faultline
