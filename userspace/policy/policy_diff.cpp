// Rule-level diffs of egress sections and the replay of recorded decisions.
#include "userspace/policy/policy_diff.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "userspace/policy/policy_writer.h"

namespace faultline {
namespace {

const EgressScope* scope_by_label(const std::vector<EgressScope>& v, const std::string& label) {
  for (const auto& s : v)
    if (s.label() == label) return &s;
  return nullptr;
}

std::string rule_full(const PolicyRule& r) {
  return rule_summary(r) + (r.reason.empty() ? "" : " (reason: " + r.reason + ")");
}

// "10.0.0.5:443", "[fd00::1]:443" -> address and port.
bool parse_endpoint(const std::string& text, fl_addr& a, uint16_t& port) {
  std::string host, p;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find("]:");
    if (close == std::string::npos) return false;
    host = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) return false;
    host = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  auto pre = parse_prefix(host);
  if (!pre || !pre->exact()) return false;
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  const unsigned long n = std::stoul(p);
  if (n > 65535) return false;
  a = pre->addr;
  port = static_cast<uint16_t>(n);
  return true;
}

}  // namespace

std::vector<EgressChange> diff_egress(const std::vector<EgressScope>& live, const std::vector<EgressScope>& next) {
  using K = EgressChange::Kind;
  std::vector<EgressChange> out;
  for (const auto& n : next) {
    const EgressScope* l = scope_by_label(live, n.label());
    if (!l) {
      out.push_back(
          {K::ScopeAdded, n.label(), "", "", scope_settings(n) + ", " + std::to_string(n.rules.size()) + " rules"});
      out.reserve(out.size() + n.rules.size());
      for (const auto& r : n.rules) out.push_back({K::RuleAdded, n.label(), r.name, "", rule_full(r)});
      continue;
    }
    if (scope_settings(*l) != scope_settings(n))
      out.push_back({K::ScopeChanged, n.label(), "", scope_settings(*l), scope_settings(n)});
    // By name, through an index: a scope may hold tens of thousands of rules.
    std::map<std::string_view, const PolicyRule*> live_rules, next_rules;
    for (const auto& r : l->rules) live_rules.emplace(r.name, &r);
    for (const auto& r : n.rules) next_rules.emplace(r.name, &r);
    for (const auto& r : n.rules) {
      auto o = live_rules.find(r.name);
      if (o == live_rules.end())
        out.push_back({K::RuleAdded, n.label(), r.name, "", rule_full(r)});
      else if (rule_full(*o->second) != rule_full(r))
        out.push_back({K::RuleChanged, n.label(), r.name, rule_full(*o->second), rule_full(r)});
    }
    for (const auto& r : l->rules)
      if (!next_rules.contains(r.name)) out.push_back({K::RuleRemoved, n.label(), r.name, rule_full(r), ""});
  }
  for (const auto& l : live) {
    if (scope_by_label(next, l.label())) continue;
    out.push_back(
        {K::ScopeRemoved, l.label(), "", scope_settings(l) + ", " + std::to_string(l.rules.size()) + " rules", ""});
  }
  return out;
}

std::string diff_text(const std::vector<EgressChange>& changes) {
  using K = EgressChange::Kind;
  std::string o;
  for (const auto& c : changes) {
    switch (c.kind) {
      case K::ScopeAdded:
        o += "+ scope " + c.scope + ": " + c.now + "\n";
        break;
      case K::ScopeRemoved:
        o += "- scope " + c.scope + ": " + c.was + "\n";
        break;
      case K::ScopeChanged:
        o += "~ scope " + c.scope + ": was " + c.was + "; now " + c.now + "\n";
        break;
      case K::RuleAdded:
        o += "+ " + c.scope + " rule " + c.rule + ": " + c.now + "\n";
        break;
      case K::RuleRemoved:
        o += "- " + c.scope + " rule " + c.rule + ": " + c.was + "\n";
        break;
      case K::RuleChanged:
        o += "~ " + c.scope + " rule " + c.rule + ": was " + c.was + "; now " + c.now + "\n";
        break;
    }
  }
  return o;
}

Result<std::vector<RecordedDecision>> read_decision_log(std::string_view text) {
  std::vector<RecordedDecision> out;
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string at = "line " + std::to_string(line_no) + ": ";
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return input_error(0, at + "not a JSON object");
    auto str = [&](const char* k) -> std::string {
      auto it = j.find(k);
      return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    const std::string verdict = str("verdict"), op = str("op"), dest = str("destination"), proto = str("proto");
    if (verdict.empty() || op.empty() || dest.empty())
      return input_error(0, at + "not a guard decision (op, destination and verdict are needed)");
    if (op != "connect" && op != "sendmsg") continue;
    if (verdict != "allow" && verdict != "redirect" && verdict != "deny" && verdict != "would-deny") continue;
    RecordedDecision d;
    d.op = op;
    d.destination = dest;
    if (!parse_endpoint(dest, d.addr, d.port))
      return input_error(0, at + "destination '" + dest + "' is not ADDRESS:PORT");
    d.proto = proto == "tcp" ? IPPROTO_TCP : proto == "udp" ? IPPROTO_UDP : 0;
    d.allowed = verdict == "allow" || verdict == "redirect";
    out.push_back(std::move(d));
  }
  return out;
}

Simulation simulate_decisions(const std::vector<RecordedDecision>& log, const std::vector<EgressScope>& scopes,
                              std::string_view cgroup_path) {
  Simulation s;
  std::map<std::pair<std::string, bool>, SimulatedFlip> flips;
  for (const auto& d : log) {
    ++s.decisions;
    PolicyDecision now = decide(scopes, cgroup_path, d.addr, d.port, d.proto);
    if (!now.scope) {
      ++s.unjudged;
      continue;
    }
    if (now.allowed == d.allowed) {
      ++s.unchanged;
      continue;
    }
    const std::string dest = d.destination + "/" +
                             (d.proto == IPPROTO_TCP   ? "tcp"
                              : d.proto == IPPROTO_UDP ? "udp"
                                                       : "ip");
    SimulatedFlip& f = flips[{dest, now.allowed}];
    f.destination = dest;
    f.now_allowed = now.allowed;
    f.count++;
    f.decided_by =
        now.rule ? "rule " + now.rule->name : std::string("default ") + (now.scope->default_allow ? "allow" : "deny");
    if (!now.allowed && !now.enforced) f.decided_by += ", monitor: reported only";
  }
  for (auto& [k, f] : flips) s.flips.push_back(f);
  std::stable_sort(s.flips.begin(), s.flips.end(),
                   [](const SimulatedFlip& a, const SimulatedFlip& b) { return a.count > b.count; });
  return s;
}

std::string simulation_text(const Simulation& s) {
  std::string o = "replayed " + std::to_string(s.decisions) + " recorded decision" + (s.decisions == 1 ? "" : "s") +
                  ": " + std::to_string(s.unchanged) + " unchanged";
  if (s.unjudged) o += ", " + std::to_string(s.unjudged) + " not judged (no scope covers the cgroup)";
  o += "\n";
  for (bool allowed : {false, true}) {
    uint64_t n = 0;
    for (const auto& f : s.flips) n += f.now_allowed == allowed ? f.count : 0;
    o += std::string(allowed ? "  would now be allowed (were denied): " : "  would now be denied (were allowed): ") +
         std::to_string(n) + "\n";
    for (const auto& f : s.flips) {
      if (f.now_allowed != allowed) continue;
      o += "    " + f.destination + "  x" + std::to_string(f.count) + "  (" + f.decided_by + ")\n";
    }
  }
  return o;
}

}  // namespace faultline
