// The guard's decision: deny, then approve, then allow, then the default.
#include "userspace/guard/guard_policy.h"

#include <hs/hs.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "userspace/guard/hs_scratch.h"

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace guard_policy_detail {

enum class Match : uint8_t { No, Yes, OnUnknownFacts };

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

bool model_matches(std::string_view pattern, std::string_view model) {
  if (pattern.ends_with('*')) {
    pattern.remove_suffix(1);
    return model.size() >= pattern.size() && iequals(model.substr(0, pattern.size()), pattern);
  }
  return iequals(pattern, model);
}

// One SQL matcher over one of the statement's lists: any (deny, approve) or
// every (allow) entry.
template <class Pred>
bool sql_list_matches(const std::vector<std::string>& list, bool every, Pred pred) {
  if (!every) return std::any_of(list.begin(), list.end(), pred);
  return !list.empty() && std::all_of(list.begin(), list.end(), pred);
}

bool sql_match(const GuardRule& r, const SqlStatementFacts& s) {
  const bool every = r.action == GuardVerdict::Allow;
  if (!r.sql_verb.empty() && !sql_list_matches(s.verbs, every, [&](const std::string& v) { return v == r.sql_verb; }))
    return false;
  if (!r.sql_table.empty() &&
      !sql_list_matches(s.tables, every, [&](const std::string& t) { return sql_name_matches(r.sql_table, t); }))
    return false;
  if (!r.sql_function.empty() && !sql_list_matches(s.functions, every, [&](const std::string& fn) {
        return sql_name_matches(r.sql_function, fn);
      }))
    return false;
  return true;
}

// A Kubernetes glob against a fact, case-insensitively.
bool k8s_matches(std::string_view glob, std::string_view value) {
  std::string lower(value);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return mcp_glob_match(glob, lower);
}

Match k8s_match(const GuardRule& r, const std::optional<K8sRequestFacts>& k) {
  if (!k) return Match::No;
  if (k->unknown) return r.action == GuardVerdict::Allow ? Match::No : Match::OnUnknownFacts;
  if (!r.k8s_verb.empty() && r.k8s_verb != "*" && r.k8s_verb != k->verb) return Match::No;
  if (!r.k8s_resource.empty() && !k8s_matches(r.k8s_resource, k->resource)) return Match::No;
  if (!r.k8s_namespace.empty() && !k8s_matches(r.k8s_namespace, k->namespace_)) return Match::No;
  if (!r.k8s_name.empty() && !k8s_matches(r.k8s_name, k->name)) return Match::No;
  return Match::Yes;
}

// host: f.host canonical (canonical_guard_host), made once per request.
Match match(const GuardRule& r, const RequestFacts& f, std::string_view host) {
  if (r.is_sql() != (f.sql != nullptr)) return Match::No;
  if (f.sql != nullptr) return sql_match(r, *f.sql) ? Match::Yes : Match::No;
  if (r.is_mcp() != f.mcp) return Match::No;
  if (f.mcp) {
    if (!r.mcp_tool.empty() && !mcp_glob_match(r.mcp_tool, f.mcp_tool)) return Match::No;
    const nlohmann::json empty = nlohmann::json::object();
    const nlohmann::json& args = f.mcp_arguments != nullptr ? *f.mcp_arguments : empty;
    for (const McpArgMatcher& m : r.mcp_args)
      if (!m.matches(args)) return Match::No;
    return Match::Yes;
  }
  if (r.host && !r.host->matches_canonical(host, f.port)) return Match::No;
  if (!r.method.empty() && !iequals(r.method, f.method)) return Match::No;
  if (!r.path.empty() && f.path.find(r.path) == std::string::npos) return Match::No;
  if (!r.dlp_type.empty()) {
    if (f.dlp_findings.empty()) return Match::No;
    if (r.dlp_type != "any" &&
        std::find(f.dlp_findings.begin(), f.dlp_findings.end(), r.dlp_type) == f.dlp_findings.end())
      return Match::No;
  }
  bool unknown = false;
  if (r.is_k8s()) {
    const Match m = k8s_match(r, f.k8s);
    if (m == Match::No) return Match::No;
    unknown = m == Match::OnUnknownFacts;
  }
  if (!r.llm_model.empty()) {
    if (f.llm_model) {
      if (!model_matches(r.llm_model, *f.llm_model)) return Match::No;
    } else if (f.llm_facts_unparseable) {
      unknown = true;
    } else {
      return Match::No;
    }
  }
  if (r.llm_max_tokens_over) {
    if (f.llm_max_tokens) {
      if (*f.llm_max_tokens <= *r.llm_max_tokens_over) return Match::No;
    } else if (f.llm_facts_unparseable) {
      unknown = true;
    } else {
      return Match::No;
    }
  }
  return unknown ? Match::OnUnknownFacts : Match::Yes;
}

size_t action_slot(GuardVerdict action) { return static_cast<size_t>(action); }

}  // namespace guard_policy_detail

GuardRuleIndex::GuardRuleIndex(const std::vector<GuardRule>& rules) : rules_(rules.data()), count_(rules.size()) {
  using guard_policy_detail::action_slot;
  std::vector<std::string> paths;  // distinct, by id
  std::unordered_map<std::string, uint32_t> path_ids;
  for (size_t i = 0; i < rules.size(); ++i) {
    const GuardRule& r = rules[i];
    const auto at = static_cast<uint32_t>(i);
    if (!r.host && !r.path.empty()) {
      auto [it, added] = path_ids.emplace(r.path, static_cast<uint32_t>(paths.size()));
      if (added) {
        paths.push_back(r.path);
        by_path_.emplace_back();
      }
      by_path_[it->second][action_slot(r.action)].push_back(at);
      path_all_[action_slot(r.action)].push_back(at);
      ++path_rule_count_;
      continue;
    }
    Positions& lists = !r.host ? any_host_ : (r.host->wildcard ? wildcard_ : exact_)[r.host->name];
    lists[action_slot(r.action)].push_back(at);
  }
  if (paths.empty()) return;
  std::vector<const char*> exprs;
  std::vector<size_t> lens;
  std::vector<unsigned> flags(paths.size(), HS_FLAG_SINGLEMATCH), ids;
  for (size_t id = 0; id < paths.size(); ++id) {
    exprs.push_back(paths[id].data());
    lens.push_back(paths[id].size());
    ids.push_back(static_cast<unsigned>(id));
  }
  hs_compile_error_t* err = nullptr;
  if (hs_valid_platform() == HS_SUCCESS &&
      hs_compile_lit_multi(exprs.data(), flags.data(), ids.data(), lens.data(), static_cast<unsigned>(exprs.size()),
                           HS_MODE_BLOCK, nullptr, &path_db_, &err) == HS_SUCCESS) {
    path_db_serial_ = hs_next_serial();
    return;
  }
  hs_free_compile_error(err);
  // No database: the path rules are read for every request, as host-less
  // rules are, merged back in the order written.
  path_db_ = nullptr;
  for (size_t slot = 0; slot < any_host_.size(); ++slot) {
    std::vector<uint32_t>& all = any_host_[slot];
    all.insert(all.end(), path_all_[slot].begin(), path_all_[slot].end());
    std::sort(all.begin(), all.end());
  }
  by_path_.clear();
  path_all_ = {};
}

GuardRuleIndex::~GuardRuleIndex() {
  if (path_db_) hs_free_database(path_db_);
}

void GuardRuleIndex::rules_on_path(std::string_view path, Positions& out) const {
  for (std::vector<uint32_t>& v : out) v.clear();
  if (!path_db_ || path.empty()) return;  // no path rules, or none a path-less request can meet
  hs_scratch_t* scratch = hs_thread_scratch(path_db_, path_db_serial_);
  struct Hits {
    const GuardRuleIndex* index;
    Positions* out;
  } hits{this, &out};
  auto on_match = [](unsigned int id, unsigned long long, unsigned long long, unsigned int, void* ctx) -> int {
    auto* h = static_cast<Hits*>(ctx);
    for (size_t slot = 0; slot < h->out->size(); ++slot) {
      const std::vector<uint32_t>& rules = h->index->by_path_[id][slot];
      (*h->out)[slot].insert((*h->out)[slot].end(), rules.begin(), rules.end());
    }
    return 0;
  };
  if (!scratch ||
      hs_scan(path_db_, path.data(), static_cast<unsigned>(path.size()), 0, scratch, on_match, &hits) != HS_SUCCESS) {
    out = path_all_;  // read them all rather than miss one
    return;
  }
  for (std::vector<uint32_t>& v : out) std::sort(v.begin(), v.end());
}

size_t GuardRuleIndex::lists_for(GuardVerdict action, std::string_view host, const Positions& on_path,
                                 std::vector<const std::vector<uint32_t>*>& out) const {
  const size_t slot = guard_policy_detail::action_slot(action);
  out.clear();
  auto add = [&](const Positions& lists) {
    if (!lists[slot].empty()) out.push_back(&lists[slot]);
  };
  add(any_host_);
  add(on_path);
  if (auto it = exact_.find(host); it != exact_.end()) add(it->second);
  if (!wildcard_.empty()) {
    // *.example.com can match a.example.com and a.b.example.com: each suffix
    // after a dot is a name a wildcard rule may hold.
    for (size_t dot = host.find('.'); dot != std::string_view::npos; dot = host.find('.', dot + 1))
      if (auto it = wildcard_.find(host.substr(dot + 1)); it != wildcard_.end()) add(it->second);
  }
  return out.size();
}

std::shared_ptr<const GuardPolicy> with_rule_index(std::shared_ptr<const GuardPolicy> policy) {
  if (!policy || (policy->index && policy->index->covers(policy->rules))) return policy;
  auto indexed = std::make_shared<GuardPolicy>(*policy);
  indexed->index = std::make_shared<const GuardRuleIndex>(indexed->rules);
  return indexed;
}

GuardDecision decide(const GuardPolicy& policy, const RequestFacts& facts) {
  using guard_policy_detail::Match;
  const bool enforced = policy.mode == GuardMode::Enforce;
  const std::string host = canonical_guard_host(facts.host);
  // MCP calls and SQL statements are judged by rules without a host: the
  // index, by host, is for HTTP requests.
  const bool indexed = policy.index && policy.index->covers(policy.rules) && !facts.mcp && facts.sql == nullptr;
  GuardRuleIndex::Positions on_path;
  if (indexed) policy.index->rules_on_path(facts.path, on_path);
  for (GuardVerdict action : {GuardVerdict::Deny, GuardVerdict::Approve, GuardVerdict::Allow}) {
    const GuardRule* on_unknown = nullptr;
    const GuardRule* decided = nullptr;
    auto consider = [&](const GuardRule& r) {
      const Match m = guard_policy_detail::match(r, facts, host);
      if (m == Match::Yes) decided = &r;
      // Fail safe: unknown facts may deny or hold a request, never let it through.
      if (m == Match::OnUnknownFacts && action != GuardVerdict::Allow && !on_unknown) on_unknown = &r;
      return decided != nullptr;
    };
    if (indexed) {
      policy.index->visit(action, host, on_path, [&](uint32_t at) { return consider(policy.rules[at]); });
    } else {
      for (const GuardRule& r : policy.rules)
        if (r.action == action && consider(r)) break;
    }
    if (decided) return GuardDecision{action, decided->name, decided->reason, enforced, false, decided->is_k8s()};
    if (on_unknown) {
      const bool k8s = on_unknown->is_k8s() && facts.k8s && facts.k8s->unknown;
      std::string reason(k8s ? kK8sFactsUnknownReason : kLlmFactsUnknownReason);
      if (!on_unknown->reason.empty()) reason += "; " + on_unknown->reason;
      return GuardDecision{action, on_unknown->name, std::move(reason), enforced, !k8s, on_unknown->is_k8s()};
    }
  }
  return GuardDecision{
      policy.default_allow ? GuardVerdict::Allow : GuardVerdict::Deny, "",
      policy.default_allow ? "no rule matched: allowed by default" : "no rule matched: denied by default", enforced,
      false};
}

GuardDecision decide_sql_request(const GuardPolicy& policy, const SqlFacts& sql, GuardDecision http) {
  const bool enforced = policy.mode == GuardMode::Enforce;
  if (!sql.parsed)
    return GuardDecision{GuardVerdict::Deny, std::string(kSqlRuleUnparseable), "the SQL cannot be read: " + sql.error,
                         enforced, false};
  for (GuardVerdict strictest : {GuardVerdict::Deny, GuardVerdict::Approve}) {
    if (http.verdict == strictest) return http;
    for (const SqlStatementFacts& st : sql.statements) {
      RequestFacts f;
      f.method = st.verbs.empty() ? "" : st.verbs.front();
      f.sql = &st;
      GuardDecision d = decide(policy, f);
      if (d.verdict != strictest) continue;
      if (d.reason.empty()) {
        d.reason = "a " + f.method + " statement";
        for (size_t i = 0; i < st.tables.size(); ++i) d.reason += (i == 0 ? " on " : ", ") + st.tables[i];
      }
      return d;
    }
  }
  return http;
}

}  // namespace faultline
