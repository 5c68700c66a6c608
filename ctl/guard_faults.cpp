// The guard's HTTP faults from flags or a file: one checker for both, so a
// fault in a file is refused for the same reasons, in the same words, as the
// same fault on the command line.
#include "ctl/guard_faults.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "base/units.h"
#include "ctl/flag_error.h"
#include "ctl/tls_flags.h"
#include "userspace/faults/packet/spec.h"
#include "userspace/net/address.h"
#include "userspace/policy/policy.h"

namespace faultline {
namespace {

// At most this many faults per guard: each is tried in order per request.
constexpr size_t kMaxGuardFaults = 64;

struct HostPort {
  std::string host;  // as matched: a name, an IPv4 address, or [IPv6]
  std::string port;
};

Result<HostPort> split_host(const std::string& text, const std::string& field) {
  if (text.empty()) return bad(field + ": empty (a host name or address, optionally :PORT)");
  HostPort hp{text, "443"};
  if (text[0] == '[') {
    const size_t end = text.find(']');
    if (end == std::string::npos) return bad(field + " " + text + ": an IPv6 address without its closing ]");
    hp.host = text.substr(0, end + 1);
    if (end + 1 < text.size()) {
      if (text[end + 1] != ':') return bad(field + " " + text + ": expected [IPv6]:PORT");
      hp.port = text.substr(end + 2);
    }
  } else if (const size_t colons = std::count(text.begin(), text.end(), ':'); colons == 1) {
    hp.host = text.substr(0, text.find(':'));
    hp.port = text.substr(text.find(':') + 1);
  } else if (colons > 1) {
    hp.host = "[" + text + "]";
  }
  if (hp.host.empty() || hp.host == "[]") return bad(field + " " + text + ": no host before the port");
  if (hp.port.empty() || hp.port.size() > 5 || hp.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(hp.port) == 0 || std::stoul(hp.port) > 65535)
    return bad(field + " " + text + ": the port must be one number from 1 to 65535");
  return hp;
}

Result<int64_t> whole(const std::string& field, const std::string& v, int64_t lo, int64_t hi) {
  if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos || std::stoll(v) < lo ||
      std::stoll(v) > hi)
    return bad(field + " " + v + ": a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return std::stoll(v);
}

}  // namespace

Result<GuardFault> guard_fault_from_words(const GuardFaultWords& w, bool terminate, size_t index,
                                          const std::string& entry,
                                          const std::function<std::string(const std::string&)>& name) {
  const int kinds = int(w.status.has_value()) + int(w.delay.has_value()) + int(w.reset) + int(w.truncate.has_value()) +
                    int(w.llm.has_value());
  if (kinds != 1) {
    if (!entry.empty())
      return bad(entry + ": give exactly one of status, delay, reset, truncate, llm (found " + std::to_string(kinds) +
                 ")");
    return bad(
        "give exactly one of --fault-status N, --fault-delay D, --fault-reset, --fault-truncate N, --fault-llm "
        "PRESET with --fault-host");
  }
  if (!w.host)
    return bad((entry.empty() ? name("host") : entry + ": host") +
               " is required: the host whose requests are faulted (NAME or ADDRESS[:PORT])");
  auto hp = split_host(*w.host, name("host"));
  if (!hp) return hp.error();
  GuardFault g;
  auto target = parse_tcp_target(hp->host + ":" + hp->port);
  if (!target) return bad(name("host") + " " + *w.host + ": " + target.error().message);
  g.target = std::move(*target);
  HttpFault& f = g.fault;
  // A name is also matched (Host header, SNI): names that share its addresses
  // (a CDN, virtual hosts) are not faulted. An address is the connection's
  // destination already: every request to it is.
  const bool address = hp->host[0] == '[' || parse_prefix(hp->host).ok();
  if (!address) f.match.host = hp->host;
  if (w.status) {
    f.type = HttpFaultType::status;
    auto n = whole(name("status"), *w.status, 200, 599);
    if (!n) return n.error();
    f.status = *n;
  } else if (w.delay) {
    f.type = HttpFaultType::delay;
    auto d = parse_duration_ns(*w.delay);
    if (!d) return bad(name("delay") + " " + *w.delay + ": " + d.error().message);
    if (*d == 0 || *d > FaultCaps::kMaxDelayNs || *d % 1'000'000 != 0)
      return bad(name("delay") + " " + *w.delay + ": whole milliseconds, from 1ms to 60s");
    f.delay_ms = int64_t(*d / 1'000'000);
  } else if (w.reset) {
    f.type = HttpFaultType::reset;
  } else if (w.truncate) {
    f.type = HttpFaultType::truncate;
    auto n = whole(name("truncate"), *w.truncate, 0, int64_t{1} << 40);
    if (!n) return n.error();
    f.bytes = *n;
  } else {
    f.type = HttpFaultType::llm;
    auto j = nlohmann::json{{"type", "llm"}, {"attributes", {{"preset", *w.llm}}}};
    if (!http_fault_from_json(j))
      return bad(name("llm") + " " + *w.llm +
                 ": not a preset (overloaded, rate-limit, server-error, bad-gateway, timeout, stream-cut)");
    if (w.llm_provider) j["attributes"]["provider"] = *w.llm_provider;
    auto parsed = http_fault_from_json(j);
    if (!parsed)
      return bad(name("llm-provider") + " " + w.llm_provider.value_or("") +
                 ": not a provider (anthropic, openai; omitted: the one the host's name says)");
    f.preset = parsed->preset;
    f.provider = parsed->provider;
    f.events = parsed->events;
    f.delay_ms = parsed->delay_ms;
  }
  if (w.llm_provider && f.type != HttpFaultType::llm)
    return bad(name("llm-provider") + " applies to an llm fault only (the provider whose errors it answers)");
  if (w.attempts) {
    auto n = whole(name("attempts"), *w.attempts, 1, 100);
    if (!n) return n.error();
    f.attempts = *n;
  }
  if (w.path) {
    if (w.path->empty() || (*w.path)[0] != '/')
      return bad(name("path") + " " + *w.path + ": must start with / (a prefix of whole segments, or a glob)");
    f.match.path = *w.path;
  }
  if (w.pct) {
    auto p = parse_percent(*w.pct);
    if (!p) return bad(name("pct") + " " + *w.pct + ": " + p.error().message);
    f.percent = *p;
  }
  f.name = "f" + std::to_string(index + 1) + "_" +
           (f.type == HttpFaultType::llm ? "llm_" + std::string(llm_preset_name(f.preset))
                                         : std::string(http_fault_type_name(f.type)));
  if (auto v = validate_http_fault(f); !v) return bad(name("host") + " " + *w.host + ": " + v.error().message);
  if (!terminate && target_is_tls(g.target, false)) {
    // The field that asks for the plaintext, in the order needs_plaintext() judges.
    std::string flag = name(f.type == HttpFaultType::llm ? "llm" : std::string(http_fault_type_name(f.type)));
    if (f.type == HttpFaultType::delay || f.type == HttpFaultType::reset) flag = name(w.path ? "path" : "attempts");
    FL_TRY(check_fault_on_tls(f, flag, hp->host + ":" + hp->port));
  }
  return g;
}

Result<std::vector<GuardFault>> parse_guard_faults_file(const std::string& file, bool terminate, size_t first_index) {
  auto text = read_policy_text(file);
  if (!text) return bad("--faults " + text.error().describe());
  YAML::Node doc;
  try {
    doc = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return bad("--faults " + file + ":" + std::to_string(std::max(e.mark.line, 0) + 1) + ":" +
               std::to_string(std::max(e.mark.column, 0) + 1) + ": not YAML or JSON: " + e.msg);
  }
  auto at = [&](const YAML::Node& n) {
    return "--faults " + file + ":" + std::to_string(n.Mark().line + 1) + ":" + std::to_string(n.Mark().column + 1);
  };
  YAML::Node list = doc;
  if (doc.IsMap()) {
    for (const auto& kv : doc)
      if (kv.first.as<std::string>() != "faults")
        return bad(at(kv.first) + ": " + kv.first.as<std::string>() +
                   ": unknown field (the file is a list of faults, "
                   "or {faults: [...]})");
    list = doc["faults"];
  }
  if (!list || !list.IsSequence() || list.size() == 0)
    return bad("--faults " + file +
               ": expected a non-empty list of faults (each: host, and one of status, delay, "
               "reset, truncate, llm; path and pct optional)");
  if (list.size() > kMaxGuardFaults)
    return bad("--faults " + file + ": " + std::to_string(list.size()) + " faults, at most " +
               std::to_string(kMaxGuardFaults));
  std::vector<GuardFault> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node& entry = list[i];
    const std::string where = "faults[" + std::to_string(i) + "]";
    if (!entry.IsMap()) return bad(at(entry) + ": " + where + ": expected a mapping (host: ..., status: 503)");
    GuardFaultWords w;
    std::map<std::string, YAML::Node> fields;
    for (const auto& kv : entry) {
      const std::string key = kv.first.as<std::string>();
      const std::string field = where + "." + key;
      if (!kv.second.IsScalar()) return bad(at(kv.second) + ": " + field + ": expected a single value");
      const std::string v = kv.second.as<std::string>();
      fields[key] = kv.second;
      if (key == "host")
        w.host = v;
      else if (key == "path")
        w.path = v;
      else if (key == "status")
        w.status = v;
      else if (key == "delay")
        w.delay = v;
      else if (key == "truncate")
        w.truncate = v;
      else if (key == "llm")
        w.llm = v;
      else if (key == "llm-provider")
        w.llm_provider = v;
      else if (key == "pct")
        w.pct = v;
      else if (key == "attempts")
        w.attempts = v;
      else if (key == "reset") {
        if (v != "true" && v != "false") return bad(at(kv.second) + ": " + field + ": true or false, got " + v);
        w.reset = v == "true";
      } else {
        return bad(at(kv.first) + ": " + field +
                   ": unknown field (host, path, status, delay, reset, truncate, llm, llm-provider, pct, attempts)");
      }
    }
    auto name = [&](const std::string& key) {
      auto it = fields.find(key);
      return (it != fields.end() ? at(it->second) : at(entry)) + ": " + where + "." + key;
    };
    auto g = guard_fault_from_words(w, terminate, first_index + i, at(entry) + ": " + where, name);
    if (!g) return g.error();
    out.push_back(std::move(*g));
  }
  return out;
}

}  // namespace faultline
