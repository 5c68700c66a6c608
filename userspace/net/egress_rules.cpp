// Rule parsing and the covering-set compilation for the sockaddr tries.
#include "userspace/net/egress_rules.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace faultline {

std::string decision_name(uint8_t v) {
  switch (v) {
    case FL_V_ALLOW:
      return "allow";
    case FL_V_DENY:
      return "deny";
    case FL_V_WOULD_DENY:
      return "would-deny";
    case FL_V_INJECT:
      return "inject";
    case FL_V_EXFIL:
      return "exfil-cap";
    case FL_V_WOULD_EXFIL:
      return "would-exfil-cap";
    case FL_V_REDIRECT:
      return "redirect";
    default:
      return "?";
  }
}

namespace {

// flag: how an error starts ("--deny ", or "--redirect D=T: destination ").
Result<EgressRule> parse_destination(const std::string& flag, Verdict v, const std::string& text) {
  EgressRule r;
  r.verdict = v;
  r.text = text;
  std::string body = text;
  if (auto slash = body.rfind('/'); slash != std::string::npos) {
    std::string tail = body.substr(slash + 1);
    if (tail == "tcp" || tail == "udp") {
      r.proto = tail == "tcp" ? IPPROTO_TCP : IPPROTO_UDP;
      body = body.substr(0, slash);
    }
  }
  std::string addr = body, port;
  if (!body.empty() && body.front() == '[') {
    auto close = body.find(']');
    if (close == std::string::npos) return make_error(EINVAL, flag + text + ": unclosed [IPv6]");
    addr = body.substr(1, close - 1);
    if (close + 1 < body.size()) {
      if (body[close + 1] != ':') return make_error(EINVAL, flag + text + ": expected :PORT after ]");
      port = body.substr(close + 2);
    }
  } else if (std::count(body.begin(), body.end(), ':') == 1) {
    auto colon = body.find(':');
    addr = body.substr(0, colon);
    port = body.substr(colon + 1);
  }
  auto p = parse_prefix(addr);
  if (!p) {
    std::string why = p.error().message;
    if (addr.find_first_not_of("0123456789./") != std::string::npos && addr.find(':') == std::string::npos)
      why = "'" + addr + "' is not an address or CIDR (host names come with the policy compiler)";
    return make_error(EINVAL, flag + text + ": " + why);
  }
  r.prefix = *p;
  if (!port.empty() || body.back() == ':') {
    if (port.empty()) return make_error(EINVAL, flag + text + " (the port after ':' is missing)");
    auto pr = parse_port_range(port);
    if (!pr) return make_error(EINVAL, flag + text + ": " + pr.error().message);
    r.ports = *pr;
  }
  return r;
}

// noun: what overlaps, in the error ("deny", "redirect").
Result<CompiledTrie> compile_covers(const std::vector<EgressRule>& rules, Verdict v, const std::string& noun) {
  // Rules of this verdict grouped by prefix length, keyed by network address, so
  // the covers of a prefix are found with one probe per distinct length
  // (at most 129) instead of a scan of every rule.
  std::map<uint8_t, std::map<std::string, std::vector<uint32_t>>> by_len;
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].verdict != v) continue;
    const Prefix& p = rules[i].prefix;
    by_len[p.plen][std::string(reinterpret_cast<const char*>(p.addr.b), 16)].push_back(static_cast<uint32_t>(i));
  }
  CompiledTrie out;
  size_t prefixes = 0;
  for (const auto& [plen, keys] : by_len) prefixes += keys.size();
  out.entries.reserve(prefixes);
  for (const auto& [plen, keys] : by_len) {
    for (const auto& [addr, own] : keys) {
      Prefix prefix;
      std::memcpy(prefix.addr.b, addr.data(), 16);
      prefix.plen = plen;
      prefix.v4 = rules[own.front()].prefix.v4;
      fl_sa_bucket b{};
      size_t count = 0;
      // Longest first: this prefix's own rules, then each shorter covering prefix.
      for (auto it = by_len.rbegin(); it != by_len.rend(); ++it) {
        if (it->first > plen) continue;
        Prefix cover = prefix;
        cover.plen = it->first;
        fl_addr m = cover.mask();
        for (int i = 0; i < 16; ++i) cover.addr.b[i] &= m.b[i];
        auto hit = it->second.find(std::string(reinterpret_cast<const char*>(cover.addr.b), 16));
        if (hit == it->second.end()) continue;
        for (uint32_t id : hit->second) {
          if (++count > FL_SA_RULE_SLOTS)
            return make_error(ENOSPC, "more than " + std::to_string(FL_SA_RULE_SLOTS) + " " + noun +
                                          " rules overlap on " + prefix.str());
          const EgressRule& r = rules[id];
          fl_sa_rule& slot = b.r[b.n++];
          slot.port_lo = r.ports.lo;
          slot.port_hi = r.ports.hi;
          slot.proto = r.proto;
          slot.id = id;
        }
      }
      fl_sa_key key{};
      key.prefixlen = plen;
      key.addr = prefix.addr;
      out.entries.emplace_back(key, b);
    }
  }
  return out;
}

}  // namespace

Result<EgressRule> parse_rule(Verdict v, const std::string& text) {
  return parse_destination(v == Verdict::Allow ? "--allow " : "--deny ", v, text);
}

Result<CompiledTrie> compile_rules(const std::vector<EgressRule>& rules, Verdict v) {
  return compile_covers(rules, v, v == Verdict::Allow ? "allow" : "deny");
}

Result<uint32_t> load_rules(const std::vector<EgressRule>& rules, int deny_fd, int allow_fd) {
  uint32_t flags = 0;
  for (auto [v, fd] : {std::pair{Verdict::Deny, deny_fd}, std::pair{Verdict::Allow, allow_fd}}) {
    auto trie = compile_rules(rules, v);
    if (!trie) return trie.error();
    for (const auto& [k, b] : trie->entries) {
      if (bpf_map_update_elem(fd, &k, &b, BPF_ANY) != 0) return errno_error("cannot load an egress rule");
    }
    if (!trie->entries.empty()) flags |= v == Verdict::Deny ? FL_SA_HAS_DENY : FL_SA_HAS_ALLOW;
  }
  return flags;
}

std::string RedirectRule::target_text() const { return endpoint_text(target, target_port); }

Result<RedirectRule> parse_redirect(const std::string& text) {
  const std::string flag = "--redirect " + text + ": ";
  auto eq = text.find('=');
  if (eq == std::string::npos)
    return make_error(EINVAL, flag + "expected DEST=TARGET (e.g. 10.0.0.1:80=127.0.0.1:8080)");
  const std::string dest = text.substr(0, eq), target = text.substr(eq + 1);
  if (dest.empty()) return make_error(EINVAL, flag + "the destination before '=' is missing");
  if (target.empty()) return make_error(EINVAL, flag + "the target after '=' is missing (ADDR:PORT)");
  RedirectRule r;
  r.text = text;
  auto d = parse_destination(flag + "destination ", Verdict::Deny, dest);
  if (!d) return d.error();
  r.dest = *d;

  // TARGET: ADDR:PORT or [IPv6]:PORT, one address, one port.
  std::string addr, port;
  if (target.front() == '[') {
    auto close = target.find(']');
    if (close == std::string::npos) return make_error(EINVAL, flag + "target " + target + ": unclosed [IPv6]");
    addr = target.substr(1, close - 1);
    if (close + 1 >= target.size() || target[close + 1] != ':')
      return make_error(EINVAL, flag + "target " + target + ": expected :PORT after ]");
    port = target.substr(close + 2);
  } else if (std::count(target.begin(), target.end(), ':') == 1) {
    auto colon = target.find(':');
    addr = target.substr(0, colon);
    port = target.substr(colon + 1);
  } else if (target.find(':') != std::string::npos) {
    return make_error(EINVAL, flag + "target " + target + ": write an IPv6 target as [ADDR]:PORT");
  } else {
    return make_error(EINVAL, flag + "target " + target + ": the port is missing (ADDR:PORT)");
  }
  if (port.empty()) return make_error(EINVAL, flag + "target " + target + ": the port after ':' is missing");
  if (addr.find('/') != std::string::npos)
    return make_error(EINVAL, flag + "target " + target + ": one address, not a CIDR");
  auto a = parse_prefix(addr);
  if (!a) return make_error(EINVAL, flag + "target " + target + ": " + a.error().message);
  if (port.find('-') != std::string::npos)
    return make_error(EINVAL, flag + "target " + target + ": one port, not a range");
  auto p = parse_port_range(port);
  if (!p) return make_error(EINVAL, flag + "target " + target + ": " + p.error().message);
  static const fl_addr any4 = [] {
    fl_addr z{};
    z.b[10] = z.b[11] = 0xFF;
    return z;
  }();
  if (std::equal(a->addr.b, a->addr.b + 16, fl_addr{}.b) || std::equal(a->addr.b, a->addr.b + 16, any4.b))
    return make_error(EINVAL, flag + "target " + target + ": the unspecified address is not a target");
  if (a->v4 != r.dest.prefix.v4)
    return make_error(EINVAL, flag + "the destination is " + (r.dest.prefix.v4 ? "IPv4" : "IPv6") + " and the target " +
                                  (a->v4 ? "IPv4" : "IPv6") + " (a redirect keeps the address family)");
  r.target = a->addr;
  r.target_port = p->lo;
  return r;
}

Result<CompiledRedirects> compile_redirects(const std::vector<RedirectRule>& rules) {
  static_assert(FL_SA_REDIR_SLOTS == FL_SA_RULE_SLOTS, "the redirect buckets are filled from allow/deny-sized ones");
  // The same covering sets as the allow/deny tries; slot ids index `rules`.
  std::vector<EgressRule> dests;
  for (const auto& r : rules) dests.push_back(r.dest);
  auto trie = compile_covers(dests, Verdict::Deny, "redirect");
  if (!trie) return trie.error();
  CompiledRedirects out;
  for (const auto& [k, b] : trie->entries) {
    fl_sa_redir_bucket rb{};
    rb.n = b.n;
    for (int i = 0; i < b.n; ++i) {
      const RedirectRule& r = rules[b.r[i].id];
      fl_sa_redir_rule& slot = rb.r[i];
      slot.port_lo = b.r[i].port_lo;
      slot.port_hi = b.r[i].port_hi;
      slot.proto = b.r[i].proto;
      slot.v4 = r.dest.prefix.v4 ? 1 : 0;
      slot.id = b.r[i].id;
      slot.target = r.target;
      slot.target_port = r.target_port;
    }
    out.entries.emplace_back(k, rb);
  }
  return out;
}

Status load_redirects(const std::vector<RedirectRule>& rules, int redirect_fd) {
  auto trie = compile_redirects(rules);
  if (!trie) return trie.error();
  for (const auto& [k, b] : trie->entries) {
    if (bpf_map_update_elem(redirect_fd, &k, &b, BPF_ANY) != 0) return errno_error("cannot load a redirect rule");
  }
  return {};
}

}  // namespace faultline
