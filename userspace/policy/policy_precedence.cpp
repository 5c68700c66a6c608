// The precedence rule in one place: the most specific scope decides; in it,
// deny over allow over the default. The tests and the docs' examples check
// policies against this; the compiler's tries implement its in-scope half.
#include <algorithm>

#include "userspace/policy/policy.h"

namespace faultline {

const EgressScope* scope_for(const std::vector<EgressScope>& scopes, std::string_view cgroup_path) {
  const EgressScope* best = nullptr;
  const EgressScope* host = nullptr;
  for (const auto& s : scopes) {
    if (s.host_wide) {
      host = &s;
      continue;
    }
    const std::string& c = s.cgroup;
    const bool covers = c == "/" || cgroup_path == c ||
                        (cgroup_path.size() > c.size() && cgroup_path.starts_with(c) && cgroup_path[c.size()] == '/');
    if (covers && (!best || c.size() > best->cgroup.size())) best = &s;
  }
  return best ? best : host;
}

namespace {

bool rule_matches(const PolicyRule& r, const fl_addr& addr, uint16_t port, uint8_t proto) {
  if (!r.cidr) return false;  // a host rule: matched by name, not by an address alone
  Prefix one;
  one.addr = addr;
  one.plen = 128;
  if (!prefix_covers(*r.cidr, one)) return false;
  if (r.proto && r.proto != proto) return false;
  if (r.ports.empty()) return true;
  return std::any_of(r.ports.begin(), r.ports.end(), [&](const PortRange& p) { return port >= p.lo && port <= p.hi; });
}

// The matching rule of one action with the longest prefix (the first written on a tie).
const PolicyRule* most_specific(const EgressScope& s, Verdict action, const fl_addr& addr, uint16_t port,
                                uint8_t proto) {
  const PolicyRule* best = nullptr;
  for (const auto& r : s.rules) {
    if (r.action != action || !rule_matches(r, addr, port, proto)) continue;
    if (!best || r.cidr->plen > best->cidr->plen) best = &r;
  }
  return best;
}

}  // namespace

PolicyDecision decide(const std::vector<EgressScope>& scopes, std::string_view cgroup_path, const fl_addr& addr,
                      uint16_t port, uint8_t proto) {
  PolicyDecision d;
  d.scope = scope_for(scopes, cgroup_path);
  if (!d.scope) return d;
  d.enforced = d.scope->mode == PolicyMode::Enforce;
  if ((d.rule = most_specific(*d.scope, Verdict::Deny, addr, port, proto))) {
    d.allowed = false;
  } else if ((d.rule = most_specific(*d.scope, Verdict::Allow, addr, port, proto))) {
    d.allowed = true;
  } else {
    d.allowed = d.scope->default_allow;
  }
  return d;
}

}  // namespace faultline
