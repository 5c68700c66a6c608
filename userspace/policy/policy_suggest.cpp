// Recorded destinations -> a monitor-mode, default-deny allow-list.
#include "userspace/policy/policy_suggest.h"

#include <netinet/in.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "userspace/policy/policy_diff.h"
#include "userspace/policy/policy_writer.h"

namespace faultline {
namespace {

struct Seen {
  fl_addr addr{};
  uint16_t port = 0;
  uint8_t proto = 0;
  uint64_t calls = 0;
};

using SeenKey = std::tuple<std::string, uint16_t, uint8_t>;  // address bytes, port, proto

std::string rule_name(const Seen& s) {
  std::string n = "allow-" + addr_text(s.addr);
  for (char& c : n)
    if (c == ':' || c == '.') c = '-';
  if (s.port) n += "-" + std::to_string(s.port);
  if (s.proto) n += s.proto == IPPROTO_TCP ? "-tcp" : "-udp";
  return n.substr(0, 63);
}

}  // namespace

Result<Suggestion> suggest_policy(const std::vector<std::pair<std::string, std::string>>& logs,
                                  const SuggestOptions& o) {
  Suggestion out;
  std::map<SeenKey, Seen> seen;
  auto add = [&](const fl_addr& a, uint16_t port, uint8_t proto, uint64_t calls) {
    Seen& s = seen[{std::string(reinterpret_cast<const char*>(a.b), 16), port, proto}];
    s.addr = a;
    s.port = port;
    s.proto = proto;
    s.calls += calls;
  };
  for (const auto& [file, text] : logs) {
    size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string_view line = std::string_view(text).substr(pos, end - pos);
      pos = end + 1;
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const std::string at = file + ":" + std::to_string(line_no) + ": ";
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) return input_error(0, at + "not a JSON object");
      if (o.window_s) {
        if (!j.contains("time") || !j["time"].is_number())
          return input_error(EINVAL,
                             at + "no \"time\" (recorded before faultctl stamped its logs): leave out --window");
        if (j["time"].get<double>() < o.now_s - *o.window_s) {
          ++out.outside_window;
          continue;
        }
      }
      if (j.contains("flows")) {  // faultctl top --json
        if (!j["flows"].is_array()) return input_error(0, at + "\"flows\" is not a list");
        for (const auto& f : j["flows"]) {
          ++out.records;
          std::string dest = f.is_object() ? f.value("destination", "") : "";
          std::string proto = f.is_object() ? f.value("proto", "") : "";
          auto d = read_decision_log(
              nlohmann::json{{"op", "connect"}, {"destination", dest}, {"proto", proto}, {"verdict", "allow"}}.dump());
          if (!d || d->size() != 1)
            return input_error(0, at + "a flow with destination '" + dest + "' is not ADDRESS:PORT");
          const uint64_t connects = f.value("connects", uint64_t{0});
          add((*d)[0].addr, (*d)[0].port, (*d)[0].proto, connects ? connects : 1);
        }
        continue;
      }
      auto d = read_decision_log(line);
      if (!d) return input_error(0, at + d.error().message.substr(d.error().message.find(": ") + 2));
      ++out.records;
      if (d->empty()) continue;  // injections, exfil-cap events
      const RecordedDecision& r = (*d)[0];
      if (!r.allowed && j.value("verdict", "") == "deny") {
        ++out.denied;  // enforced: the operator already said no
        continue;
      }
      add(r.addr, r.port, r.proto, 1);
    }
  }
  uint64_t total = 0;
  for (const auto& [k, s] : seen) total += s.calls;
  EgressScope scope;
  scope.host_wide = o.cgroup.empty();
  scope.cgroup = o.cgroup;
  scope.mode = PolicyMode::Monitor;  // review, watch, then enforce (docs/policy.md)
  scope.default_allow = false;
  // One rule per address: its ports (at most 8 entries, the overlap a prefix
  // may have; more are merged across the narrowest gaps) and its protocol
  // when every call used the same one.
  std::map<std::string, std::vector<const Seen*>> by_addr;
  for (const auto& [k, s] : seen) by_addr[std::get<0>(k)].push_back(&s);
  for (const auto& [key, list] : by_addr) {
    PolicyRule r;
    uint64_t calls = 0;
    bool any_port = false;
    std::set<uint8_t> protos;
    std::set<uint16_t> ports;
    for (const Seen* s : list) {
      calls += s->calls;
      protos.insert(s->proto);
      if (s->port == 0)
        any_port = true;
      else
        ports.insert(s->port);
    }
    Seen first = *list.front();
    first.port = !any_port && ports.size() == 1 ? *ports.begin() : 0;
    first.proto = protos.size() == 1 ? *protos.begin() : 0;
    r.name = rule_name(first);
    r.action = Verdict::Allow;
    Prefix p;
    p.addr = first.addr;
    p.plen = 128;
    p.v4 = is_v4_mapped(first.addr);
    r.cidr = p;
    r.proto = first.proto;
    if (!any_port) {
      std::vector<PortRange> ranges;
      for (uint16_t port : ports) ranges.push_back(PortRange{port, port});
      while (ranges.size() > FL_SA_RULE_SLOTS) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < ranges.size(); ++i)
          if (ranges[i + 1].lo - ranges[i].hi < ranges[best + 1].lo - ranges[best].hi) best = i;
        ranges[best].hi = ranges[best + 1].hi;
        ranges.erase(ranges.begin() + static_cast<long>(best) + 1);
      }
      r.ports = ranges;
    }
    const bool rare = calls < 3 || calls * 100 < total;
    out.rare += rare;
    r.reason = "seen " + std::to_string(calls) + " time" + (calls == 1 ? "" : "s") +
               (rare ? "; RARE: review before allowing" : "");
    scope.rules.push_back(std::move(r));
  }
  out.policy.name = o.name;
  out.policy.egress = std::vector<EgressScope>{std::move(scope)};
  return out;
}

std::string suggestion_text(const Suggestion& s, const std::vector<std::string>& sources) {
  std::string from;
  for (const auto& f : sources) from += (from.empty() ? "" : ", ") + f;
  const size_t n = s.policy.egress->front().rules.size();
  std::string o = "# suggested by faultctl policy suggest from " + from + "\n# " + std::to_string(s.records) +
                  " records, " + std::to_string(n) + " destination" + (n == 1 ? "" : "s") + ", " +
                  std::to_string(s.rare) + " rare (reason says RARE: review them first)";
  if (s.outside_window) o += ", " + std::to_string(s.outside_window) + " older than the window left out";
  if (s.denied) o += ", " + std::to_string(s.denied) + " enforced denials not proposed";
  o += "\n# monitor mode first: apply, watch `faultctl status`, then set mode: enforce\n";
  return o + policy_yaml_text(s.policy);
}

}  // namespace faultline
