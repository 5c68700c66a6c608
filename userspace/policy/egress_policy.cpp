// Rule parsing and the covering-set compilation for the sockaddr tries.
#include "userspace/policy/egress_policy.h"

#include <bpf/bpf.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace faultline {

std::string verdict_name(uint8_t v) {
  switch (v) {
    case FL_V_ALLOW: return "allow";
    case FL_V_DENY: return "deny";
    case FL_V_WOULD_DENY: return "would-deny";
    case FL_V_INJECT: return "inject";
    case FL_V_EXFIL: return "exfil-cap";
    case FL_V_WOULD_EXFIL: return "would-exfil-cap";
    default: return "?";
  }
}

Result<EgressRule> parse_rule(Verdict v, const std::string& text) {
  const std::string flag = v == Verdict::Allow ? "--allow " : "--deny ";
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

Result<CompiledTrie> compile_rules(const std::vector<EgressRule>& rules, Verdict v) {
  // Rules of this verdict grouped by prefix length, keyed by network address, so
  // the covers of a prefix are found with one probe per distinct length
  // (at most 129) instead of a scan of every rule.
  std::map<uint8_t, std::map<std::string, std::vector<uint16_t>>> by_len;
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].verdict != v) continue;
    const Prefix& p = rules[i].prefix;
    by_len[p.plen][std::string(reinterpret_cast<const char*>(p.addr.b), 16)].push_back(static_cast<uint16_t>(i));
  }
  CompiledTrie out;
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
        for (uint16_t id : hit->second) {
          if (++count > FL_SA_RULE_SLOTS)
            return make_error(ENOSPC, "more than " + std::to_string(FL_SA_RULE_SLOTS) + " " +
                                          (v == Verdict::Allow ? "allow" : "deny") + " rules overlap on " + prefix.str());
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

Status load_rules(const std::vector<EgressRule>& rules, int deny_fd, int allow_fd) {
  for (auto [v, fd] : {std::pair{Verdict::Deny, deny_fd}, std::pair{Verdict::Allow, allow_fd}}) {
    auto trie = compile_rules(rules, v);
    if (!trie) return trie.error();
    for (const auto& [k, b] : trie->entries) {
      if (bpf_map_update_elem(fd, &k, &b, BPF_ANY) != 0) return errno_error("cannot load an egress rule");
    }
  }
  return {};
}

}  // namespace faultline
