// Egress scopes -> the sockaddr programs' map images, with the guard's
// covering-set compiler (compile_rules), so a compiled scope is exactly what a
// guard with the same rules writes.
#include "userspace/policy/policy_compiler.h"

#include <netinet/in.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "base/errno_names.h"
#include "bpf/lib/dns_parse.h"

namespace faultline {

std::vector<EgressRule> CompiledScope::egress_rules() const {
  std::vector<EgressRule> out;
  for (const auto& r : rules) out.push_back(r.rule);
  return out;
}

namespace {

bool scope_nested_in(const EgressScope& inner, const EgressScope& outer) {
  if (outer.host_wide) return !inner.host_wide;
  if (inner.host_wide) return false;
  return outer.cgroup == "/" || (inner.cgroup.size() > outer.cgroup.size() && inner.cgroup.starts_with(outer.cgroup) &&
                                 inner.cgroup[outer.cgroup.size()] == '/');
}

std::string ports_text(const PortRange& p) {
  if (p.hi == 0) return "any";
  return p.lo == p.hi ? std::to_string(p.lo) : std::to_string(p.lo) + "-" + std::to_string(p.hi);
}

std::string rule_proto_name(uint8_t p) { return p == IPPROTO_TCP ? "tcp" : p == IPPROTO_UDP ? "udp" : "any"; }

// Host rules -> watched names: one entry per name (exact, or the suffix of a
// `*.suffix` rule), its deny and allow buckets listing every host rule of that
// name, one slot per ports entry, as the tries' buckets do.
Status compile_hosts(const EgressScope& s, CompiledScope& c) {
  std::map<std::pair<uint64_t, uint8_t>, size_t> at;
  for (size_t i = 0; i < s.rules.size(); ++i) {
    const PolicyRule& r = s.rules[i];
    if (r.cidr) continue;
    const std::string bare = r.wildcard() ? r.host.substr(2) : r.host;
    const uint8_t wild = r.wildcard() ? 1 : 0;
    const uint64_t h = fl_dns_hash_text(bare.data(), bare.size());
    auto [it, fresh] = at.emplace(std::make_pair(h, wild), c.watched.size());
    if (fresh) {
      WatchedName w;
      w.name = r.host;
      w.key.hash = h;
      w.key.wild = wild;
      w.value.ttl_min = s.dns_ttl_min;
      w.value.ttl_max = s.dns_ttl_max;
      c.watched.push_back(w);
    }
    WatchedName& w = c.watched[it->second];
    if (w.name != r.host)
      return make_error(EINVAL, s.label() + ": host names " + w.name + " and " + r.host + " hash alike");
    fl_sa_bucket& b = r.action == Verdict::Deny ? w.value.deny : w.value.allow;
    std::vector<PortRange> ports = r.ports.empty() ? std::vector<PortRange>{PortRange{}} : r.ports;
    for (const auto& pr : ports) {
      if (b.n >= FL_SA_RULE_SLOTS)
        return make_error(E2BIG, s.label() + ": more than " + std::to_string(FL_SA_RULE_SLOTS) + " " +
                                     (r.action == Verdict::Deny ? "deny" : "allow") +
                                     " rules (one per ports entry) for host " + r.host);
      const uint32_t id = static_cast<uint32_t>(c.rules.size() + c.host_rules.size());
      c.host_rules.push_back({i, id, pr});
      fl_sa_rule& slot = b.r[b.n++];
      slot.port_lo = pr.lo;
      slot.port_hi = pr.hi;
      slot.proto = r.proto;
      slot.id = id;
    }
  }
  return {};
}

Result<CompiledScope> compile_scope(const EgressScope& s) {
  CompiledScope c;
  c.scope = &s;
  c.attach = s.host_wide ? "the root cgroup (every process of the host)"
                         : "cgroup " + s.cgroup + " (and every cgroup below it)";
  for (size_t i = 0; i < s.rules.size(); ++i) {
    const PolicyRule& r = s.rules[i];
    if (!r.cidr) continue;
    std::vector<PortRange> ports = r.ports.empty() ? std::vector<PortRange>{PortRange{}} : r.ports;
    for (const auto& pr : ports) {
      EgressRule e{r.action, *r.cidr, pr, r.proto, r.name};
      if (r.ports.size() > 1) e.text = r.name + " (ports " + ports_text(pr) + ")";
      c.rules.push_back({i, e});
    }
  }
  FL_TRY(compile_hosts(s, c));
  if (c.rule_count() > FL_SA_MAX_RULES)
    return make_error(E2BIG, s.label() + ": more than " + std::to_string(FL_SA_MAX_RULES) + " address and host rules");
  const auto er = c.egress_rules();
  auto deny = compile_rules(er, Verdict::Deny);
  if (!deny) return deny.error();
  auto allow = compile_rules(er, Verdict::Allow);
  if (!allow) return allow.error();
  c.deny = std::move(*deny);
  c.allow = std::move(*allow);
  // As the guard writes it, less the decision stream: nothing reads the ring
  // buffer of a policy no command holds.
  c.policy.expires_ns = FL_SA_NO_EXPIRY;
  c.policy.armed = 1;
  c.policy.exfil_cap = s.exfil_cap;
  c.policy.deny_errno = static_cast<uint32_t>(s.deny_errno);
  c.policy.flags = FL_SA_POLICY | (s.mode == PolicyMode::Enforce ? FL_SA_ENFORCE : 0) |
                   (s.default_allow ? FL_SA_DEFAULT_ALLOW : 0) | (c.deny.entries.empty() ? 0 : FL_SA_HAS_DENY) |
                   (c.allow.entries.empty() ? 0 : FL_SA_HAS_ALLOW) | (c.watched.empty() ? 0 : FL_SA_HAS_HOSTS);
  return c;
}

std::string flags_text(uint32_t f) {
  std::string out;
  auto add = [&](uint32_t bit, const char* name) {
    if (f & bit) out += (out.empty() ? "" : "|") + std::string(name);
  };
  add(FL_SA_ENFORCE, "ENFORCE");
  add(FL_SA_DEFAULT_ALLOW, "DEFAULT_ALLOW");
  add(FL_SA_POLICY, "POLICY");
  add(FL_SA_EVENTS, "EVENTS");
  add(FL_SA_REDIRECT, "REDIRECT");
  add(FL_SA_HAS_DENY, "HAS_DENY");
  add(FL_SA_HAS_ALLOW, "HAS_ALLOW");
  add(FL_SA_SEEDED, "SEEDED");
  add(FL_SA_HAS_HOSTS, "HAS_HOSTS");
  return out.empty() ? "0" : out;
}

template <typename T>
std::string hex_of(const T& v) {
  std::string out;
  const auto* b = reinterpret_cast<const unsigned char*>(&v);
  char buf[3];
  for (size_t i = 0; i < sizeof(T); ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", b[i]);
    out += buf;
  }
  return out;
}

struct MapRow {
  const char* name;
  const char* type;
  size_t entries, key_size, value_size, max_entries;
  const char* note;
};

std::vector<MapRow> rows_of(const CompiledScope& c) {
  return {
      {"fl_sa_policy", "array", 1, sizeof(uint32_t), sizeof(fl_sa_policy), 1, ""},
      {"fl_sa_deny", "lpm_trie", c.deny.entries.size(), sizeof(fl_sa_key), sizeof(fl_sa_bucket), FL_SA_MAX_PREFIXES,
       ""},
      {"fl_sa_allow", "lpm_trie", c.allow.entries.size(), sizeof(fl_sa_key), sizeof(fl_sa_bucket), FL_SA_MAX_PREFIXES,
       ""},
      // Sized to the rule list when loaded; zeroed counters, one value per CPU.
      // Address rules, then host rules.
      {"fl_sa_rule_hits", "percpu_array", std::max<size_t>(c.rule_count(), 1), sizeof(uint32_t), sizeof(uint64_t),
       std::max<size_t>(c.rule_count(), 1), "zeroed counters; the value is per CPU"},
      {"fl_dns_watch", "hash", c.watched.size(), sizeof(fl_dns_watch_key), sizeof(fl_dns_watch), FL_DNS_MAX_WATCH,
       "host rules: watched names, this generation's"},
  };
}

std::string pad(std::string s, size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

nlohmann::json bucket_json(const CompiledScope& c, const fl_sa_bucket& b) {
  nlohmann::json rules = nlohmann::json::array();
  for (int i = 0; i < b.n; ++i) {
    const fl_sa_rule& r = b.r[i];
    const size_t policy_rule =
        r.id < c.rules.size() ? c.rules.at(r.id).policy_rule : c.host_rules.at(r.id - c.rules.size()).policy_rule;
    rules.push_back({{"id", r.id},
                     {"rule", c.scope->rules[policy_rule].name},
                     {"port_lo", r.port_lo},
                     {"port_hi", r.port_hi},
                     {"proto", rule_proto_name(r.proto)}});
  }
  return {{"n", b.n}, {"rules", rules}};
}

nlohmann::json trie_items(const CompiledScope& c, const CompiledTrie& t) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& [k, b] : t.entries) {
    Prefix p;
    p.addr = k.addr;
    p.plen = static_cast<uint8_t>(k.prefixlen);
    p.v4 = is_v4_mapped(k.addr) && k.prefixlen >= 96;
    items.push_back({{"key", {{"prefixlen", k.prefixlen}, {"prefix", p.str()}}},
                     {"value", bucket_json(c, b)},
                     {"key_hex", hex_of(k)},
                     {"value_hex", hex_of(b)}});
  }
  return items;
}

}  // namespace

Result<CompiledPolicy> compile_policy(const Policy& p) {
  CompiledPolicy out;
  out.name = p.name;
  if (p.egress) {
    for (const auto& s : *p.egress) {
      auto c = compile_scope(s);
      if (!c) return c.error();
      out.scopes.push_back(std::move(*c));
    }
    bool overlap = false;
    for (const auto& a : *p.egress)
      for (const auto& b : *p.egress) overlap |= &a != &b && scope_nested_in(a, b);
    if (overlap)
      out.notes.push_back(
          "scope precedence: the policy means the most specific scope decides, but the programs of each scope are "
          "attached to its own cgroup and the kernel runs every one on a socket's cgroup path, so a deny of an "
          "enclosing scope (or of all) also applies inside a nested one; a scope-chain lookup that lets the "
          "innermost scope decide is not yet implemented");
    if (!p.egress->empty())
      out.notes.push_back(
          "faultctl policy apply FILE writes these images, one instance of the programs per scope, each trie "
          "sized to its entries with headroom, host rules as watched names whose addresses the kernel learns "
          "from DNS answers; faultctl guard --policy FILE applies one "
          "scope's rules to one command");
  }
  if (p.faults) {
    for (const auto& f : *p.faults) out.faults.push_back(f.name + " (" + f.kind + ")");
  }
  return out;
}

std::string compiled_text(const CompiledPolicy& c) {
  std::string o = "policy " + c.name + ": " + std::to_string(c.scopes.size()) + " egress scope" +
                  (c.scopes.size() == 1 ? "" : "s") + ", " + std::to_string(c.faults.size()) + " experiment" +
                  (c.faults.size() == 1 ? "" : "s") + "\n";
  for (const auto& s : c.scopes) {
    const EgressScope& sc = *s.scope;
    o += "\nscope " + sc.label() + ": " + (sc.mode == PolicyMode::Enforce ? "enforce" : "monitor") + ", default " +
         (sc.default_allow ? "allow" : "deny") + ", deny errno " + errno_name(sc.deny_errno) +
         (sc.exfil_cap ? ", exfil cap " + std::to_string(sc.exfil_cap) + " B" : "") + "\n";
    o += "  attach: " + s.attach + "\n";
    o += "  " + pad("map", 17) + pad("type", 14) + pad("entries", 8, true) + pad("key B", 7, true) +
         pad("value B", 9, true) + pad("bytes", 10, true) + "\n";
    size_t total = 0;
    for (const auto& r : rows_of(s)) {
      const size_t bytes = r.entries * (r.key_size + r.value_size);
      total += bytes;
      o += "  " + pad(r.name, 17) + pad(r.type, 14) + pad(std::to_string(r.entries), 8, true) +
           pad(std::to_string(r.key_size), 7, true) + pad(std::to_string(r.value_size), 9, true) +
           pad(std::to_string(bytes), 10, true) + (*r.note ? std::string("  (") + r.note + ")" : "") + "\n";
    }
    o += "  total " + std::to_string(total) + " B; fl_sa_policy flags " + flags_text(s.policy.flags) + "\n";
    size_t cidr_rules = 0;
    for (const auto& r : sc.rules) cidr_rules += r.cidr ? 1 : 0;
    o += "  address rules: " + std::to_string(s.rules.size()) + " (from " + std::to_string(cidr_rules) + " cidr rule" +
         (cidr_rules == 1 ? "" : "s") + ", one per ports entry)\n";
    if (!s.watched.empty()) {
      o += "  host rules: " + std::to_string(s.host_rules.size()) + " on " + std::to_string(s.watched.size()) +
           " watched name" + (s.watched.size() == 1 ? "" : "s") + " (";
      for (size_t i = 0; i < s.watched.size(); ++i) o += (i ? ", " : "") + s.watched[i].name;
      o += "); addresses learned from DNS answers, TTL clamped to " + std::to_string(sc.dns_ttl_min) + "s-" +
           std::to_string(sc.dns_ttl_max) + "s\n";
    }
    for (const auto& n : s.not_compiled) o += "  not compiled: " + n + "\n";
  }
  if (!c.faults.empty()) {
    o += "\nexperiments: ";
    for (size_t i = 0; i < c.faults.size(); ++i) o += (i ? ", " : "") + c.faults[i];
    o += "\n  not imaged: an experiment's map entries are made when it runs (devices are chosen by route lookup "
         "then); validate checks each as faultctl run would\n";
  }
  for (const auto& n : c.notes) o += "\nnote: " + n + "\n";
  return o;
}

std::string compiled_json(const CompiledPolicy& c) {
  nlohmann::json scopes = nlohmann::json::array();
  for (const auto& s : c.scopes) {
    const EgressScope& sc = *s.scope;
    nlohmann::json maps = nlohmann::json::array();
    for (const auto& r : rows_of(s)) {
      nlohmann::json m{{"name", r.name},
                       {"type", r.type},
                       {"entries", r.entries},
                       {"key_size", r.key_size},
                       {"value_size", r.value_size},
                       {"max_entries", r.max_entries},
                       {"bytes", r.entries * (r.key_size + r.value_size)}};
      const std::string name = r.name;
      if (name == "fl_sa_policy") {
        const fl_sa_policy& p = s.policy;
        m["items"] = nlohmann::json::array({{{"key", 0},
                                             {"value",
                                              {{"expires_ns", "never"},
                                               {"exfil_cap", p.exfil_cap},
                                               {"flags", flags_text(p.flags)},
                                               {"deny_errno", errno_name(static_cast<int>(p.deny_errno))},
                                               {"armed", p.armed}}},
                                             {"key_hex", hex_of(uint32_t{0})},
                                             {"value_hex", hex_of(p)}}});
      } else if (name == "fl_sa_deny") {
        m["items"] = trie_items(s, s.deny);
      } else if (name == "fl_sa_allow") {
        m["items"] = trie_items(s, s.allow);
      } else if (name == "fl_dns_watch") {
        m["items"] = nlohmann::json::array();
        for (const auto& w : s.watched)
          m["items"].push_back({{"key", {{"name", w.name}, {"hash", hex_of(w.key.hash)}, {"wild", w.key.wild}}},
                                {"value",
                                 {{"deny", bucket_json(s, w.value.deny)},
                                  {"allow", bucket_json(s, w.value.allow)},
                                  {"ttl_min", w.value.ttl_min},
                                  {"ttl_max", w.value.ttl_max}}},
                                {"key_hex", hex_of(w.key)},
                                {"value_hex", hex_of(w.value)}});
      } else {
        m["items"] = nlohmann::json::array();  // zeroed counters
      }
      maps.push_back(std::move(m));
    }
    nlohmann::json ids = nlohmann::json::array();
    for (size_t i = 0; i < s.rules.size(); ++i) {
      const auto& r = s.rules[i];
      ids.push_back({{"id", i},
                     {"rule", sc.rules[r.policy_rule].name},
                     {"action", r.rule.verdict == Verdict::Allow ? "allow" : "deny"},
                     {"cidr", r.rule.prefix.str()},
                     {"ports", ports_text(r.rule.ports)},
                     {"proto", rule_proto_name(r.rule.proto)}});
    }
    for (const auto& h : s.host_rules) {
      const PolicyRule& r = sc.rules[h.policy_rule];
      ids.push_back({{"id", h.id},
                     {"rule", r.name},
                     {"action", r.action == Verdict::Allow ? "allow" : "deny"},
                     {"host", r.host},
                     {"ports", ports_text(h.ports)},
                     {"proto", rule_proto_name(r.proto)}});
    }
    scopes.push_back({{"scope", sc.label()},
                      {"attach", s.attach},
                      {"mode", sc.mode == PolicyMode::Enforce ? "enforce" : "monitor"},
                      {"default_allow", sc.default_allow},
                      {"deny_errno", errno_name(sc.deny_errno)},
                      {"exfil_cap", sc.exfil_cap},
                      {"maps", maps},
                      {"rule_ids", ids},
                      {"not_compiled", s.not_compiled}});
  }
  nlohmann::json j{{"policy", c.name}, {"scopes", scopes}, {"experiments", c.faults}, {"notes", c.notes}};
  return j.dump(2) + "\n";
}

}  // namespace faultline
