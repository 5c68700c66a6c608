// Policy -> canonical JSON and YAML text.
#include "userspace/policy/policy_writer.h"

#include <netinet/in.h>

#include <nlohmann/json.hpp>

#include "base/errno_names.h"
#include "base/units.h"

namespace faultline {
namespace {

std::string rule_port_text(const PortRange& p) {
  return p.lo == p.hi ? std::to_string(p.lo) : std::to_string(p.lo) + "-" + std::to_string(p.hi);
}

std::string proto_word(uint8_t p) { return p == IPPROTO_TCP ? "tcp" : p == IPPROTO_UDP ? "udp" : ""; }

nlohmann::ordered_json rule_doc(const PolicyRule& r) {
  nlohmann::ordered_json j;
  j["name"] = r.name;
  j["action"] = r.action == Verdict::Allow ? "allow" : "deny";
  if (r.cidr)
    j["cidr"] = r.cidr->str();
  else
    j["host"] = r.host;
  if (!r.ports.empty()) {
    nlohmann::ordered_json ports = nlohmann::ordered_json::array();
    for (const auto& p : r.ports) {
      if (p.lo == p.hi)
        ports.push_back(p.lo);
      else
        ports.push_back(rule_port_text(p));
    }
    j["ports"] = ports;
  }
  if (r.proto) j["proto"] = proto_word(r.proto);
  if (!r.reason.empty()) j["reason"] = r.reason;
  return j;
}

nlohmann::ordered_json scope_doc(const EgressScope& s) {
  nlohmann::ordered_json j;
  if (s.host_wide)
    j["all"] = true;
  else
    j["cgroup"] = s.cgroup;
  j["mode"] = s.mode == PolicyMode::Enforce ? "enforce" : "monitor";
  j["default_allow"] = s.default_allow;
  j["deny_errno"] = errno_name(s.deny_errno);
  if (s.exfil_cap) j["exfil_cap"] = s.exfil_cap;
  const EgressScope defaults;
  if (s.dns_ttl_min != defaults.dns_ttl_min) j["dns_ttl_min"] = std::to_string(s.dns_ttl_min) + "s";
  if (s.dns_ttl_max != defaults.dns_ttl_max) j["dns_ttl_max"] = std::to_string(s.dns_ttl_max) + "s";
  j["rules"] = nlohmann::ordered_json::array();
  for (const auto& r : s.rules) j["rules"].push_back(rule_doc(r));
  return j;
}

nlohmann::ordered_json policy_doc(const Policy& p) {
  nlohmann::ordered_json j;
  j["apiVersion"] = std::string(kPolicyApiVersion);
  j["kind"] = std::string(kPolicyKind);
  j["metadata"]["name"] = p.name;
  j["spec"]["egress"] = nlohmann::ordered_json::array();
  if (p.egress) {
    for (const auto& s : *p.egress) j["spec"]["egress"].push_back(scope_doc(s));
  }
  return j;
}

// A YAML scalar: numbers and booleans plain, strings double-quoted (JSON's
// escapes are YAML's too).
std::string yaml_scalar(const nlohmann::ordered_json& v) { return v.dump(); }

void yaml_map(const nlohmann::ordered_json& m, int indent, bool first_dash, std::string& out);

void yaml_value(const std::string& key, const nlohmann::ordered_json& v, int indent, std::string& out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    out += key + ":\n";
    yaml_map(v, indent + 2, false, out);
  } else if (v.is_array()) {
    const bool flat = std::all_of(v.begin(), v.end(), [](const auto& e) { return !e.is_structured(); });
    if (v.empty()) {
      out += key + ": []\n";
    } else if (flat) {
      out += key + ": [";
      for (size_t i = 0; i < v.size(); ++i)
        out += (i ? ", " : "") + (v[i].is_string() && key == "ports" ? v[i].get<std::string>() : yaml_scalar(v[i]));
      out += "]\n";
    } else {
      out += key + ":\n";
      for (const auto& e : v) yaml_map(e, indent + 2, true, out);
    }
  } else {
    out += key + ": " + yaml_scalar(v) + "\n";
  }
}

void yaml_map(const nlohmann::ordered_json& m, int indent, bool first_dash, std::string& out) {
  bool first = true;
  for (auto it = m.begin(); it != m.end(); ++it) {
    std::string lead(static_cast<size_t>(indent), ' ');
    if (first_dash) lead = std::string(static_cast<size_t>(indent), ' ') + (first ? "- " : "  ");
    out += lead;
    yaml_value(it.key(), it.value(), indent + (first_dash ? 2 : 0), out);
    first = false;
  }
}

}  // namespace

// The same bytes as policy_doc(p).dump(2) + "\n" (a test holds them equal),
// written straight out: building the document first took most of an apply's
// time at 100k rules. Strings are escaped by nlohmann, as in dump().
class JsonOut {
 public:
  std::string out;
  void open(char c) {
    out += c;
    first_.push_back(true);
  }
  void close(char c) {
    const bool empty = first_.back();
    first_.pop_back();
    if (!empty) {
      out += '\n';
      pad();
    }
    out += c;
  }
  // Before an item: the separator, a new line and the indent.
  void item() {
    if (!first_.back()) out += ',';
    first_.back() = false;
    out += '\n';
    pad();
  }
  void key(std::string_view k) {
    item();
    out += '"';
    out += k;  // our field names: nothing to escape
    out += "\": ";
  }
  void str(const std::string& v) { out += nlohmann::json(v).dump(); }

 private:
  void pad() { out.append(first_.size() * 2, ' '); }
  std::vector<bool> first_;
};

std::string policy_json_text(const Policy& p) {
  JsonOut j;
  j.out.reserve(256 + (p.egress ? [&] {
    size_t n = 0;
    for (const auto& s : *p.egress) n += s.rules.size();
    return n;
  }() : 0) * 140);
  j.open('{');
  j.key("apiVersion");
  j.str(std::string(kPolicyApiVersion));
  j.key("kind");
  j.str(std::string(kPolicyKind));
  j.key("metadata");
  j.open('{');
  j.key("name");
  j.str(p.name);
  j.close('}');
  j.key("spec");
  j.open('{');
  j.key("egress");
  j.open('[');
  if (p.egress) {
    for (const auto& s : *p.egress) {
      j.item();
      j.open('{');
      if (s.host_wide) {
        j.key("all");
        j.out += "true";
      } else {
        j.key("cgroup");
        j.str(s.cgroup);
      }
      j.key("mode");
      j.str(s.mode == PolicyMode::Enforce ? "enforce" : "monitor");
      j.key("default_allow");
      j.out += s.default_allow ? "true" : "false";
      j.key("deny_errno");
      j.str(errno_name(s.deny_errno));
      if (s.exfil_cap) {
        j.key("exfil_cap");
        j.out += std::to_string(s.exfil_cap);
      }
      // As scope_doc(): the TTL clamp only when it is not the default.
      if (s.dns_ttl_min != EgressScope{}.dns_ttl_min) {
        j.key("dns_ttl_min");
        j.str(std::to_string(s.dns_ttl_min) + "s");
      }
      if (s.dns_ttl_max != EgressScope{}.dns_ttl_max) {
        j.key("dns_ttl_max");
        j.str(std::to_string(s.dns_ttl_max) + "s");
      }
      j.key("rules");
      j.open('[');
      for (const auto& r : s.rules) {
        j.item();
        j.open('{');
        j.key("name");
        j.str(r.name);
        j.key("action");
        j.str(r.action == Verdict::Allow ? "allow" : "deny");
        if (r.cidr) {
          j.key("cidr");
          j.str(r.cidr->str());
        } else {
          j.key("host");
          j.str(r.host);
        }
        if (!r.ports.empty()) {
          j.key("ports");
          j.open('[');
          for (const auto& pr : r.ports) {
            j.item();
            if (pr.lo == pr.hi)
              j.out += std::to_string(pr.lo);
            else
              j.str(rule_port_text(pr));
          }
          j.close(']');
        }
        if (r.proto) {
          j.key("proto");
          j.str(proto_word(r.proto));
        }
        if (!r.reason.empty()) {
          j.key("reason");
          j.str(r.reason);
        }
        j.close('}');
      }
      j.close(']');
      j.close('}');
    }
  }
  j.close(']');
  j.close('}');
  j.close('}');
  j.out += '\n';
  return std::move(j.out);
}

std::string policy_json_text_by_document(const Policy& p) { return policy_doc(p).dump(2) + "\n"; }

std::string policy_yaml_text(const Policy& p) {
  std::string out;
  yaml_map(policy_doc(p), 0, false, out);
  return out;
}

Result<Policy> policy_from_canonical_json(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  const auto bad = [](const std::string& why) { return make_error(EINVAL, "stored policy text: " + why); };
  if (j.is_discarded() || !j.is_object() || !j.contains("spec") || !j["spec"].contains("egress"))
    return bad("not a canonical policy document");
  try {
    Policy p;
    p.name = j.at("metadata").at("name").get<std::string>();
    std::vector<EgressScope> scopes;
    for (const auto& js : j["spec"]["egress"]) {
      EgressScope s;
      s.host_wide = js.value("all", false);
      s.cgroup = js.value("cgroup", "");
      s.mode = js.at("mode").get<std::string>() == "enforce" ? PolicyMode::Enforce : PolicyMode::Monitor;
      s.default_allow = js.at("default_allow").get<bool>();
      auto e = errno_from_name(js.at("deny_errno").get<std::string>());
      if (!e) return bad("deny_errno");
      s.deny_errno = *e;
      s.exfil_cap = js.value("exfil_cap", uint64_t{0});
      for (const char* field : {"dns_ttl_min", "dns_ttl_max"}) {
        if (!js.contains(field)) continue;
        auto ns = parse_duration_ns(js[field].get<std::string>());
        if (!ns) return bad(field);
        (std::string(field) == "dns_ttl_min" ? s.dns_ttl_min : s.dns_ttl_max) =
            static_cast<uint32_t>(*ns / 1000000000ULL);
      }
      for (const auto& jr : js.at("rules")) {
        PolicyRule r;
        r.name = jr.at("name").get<std::string>();
        r.action = jr.at("action").get<std::string>() == "allow" ? Verdict::Allow : Verdict::Deny;
        if (jr.contains("cidr")) {
          auto c = parse_prefix(jr["cidr"].get<std::string>());
          if (!c) return bad("cidr " + jr["cidr"].get<std::string>());
          r.cidr = *c;
        } else {
          r.host = jr.at("host").get<std::string>();
        }
        if (jr.contains("ports")) {
          for (const auto& jp : jr["ports"]) {
            auto pr = parse_port_range(jp.is_string() ? jp.get<std::string>() : std::to_string(jp.get<unsigned>()));
            if (!pr) return bad("ports");
            r.ports.push_back(*pr);
          }
        }
        const std::string proto = jr.value("proto", "");
        r.proto = proto == "tcp" ? IPPROTO_TCP : proto == "udp" ? IPPROTO_UDP : 0;
        r.reason = jr.value("reason", "");
        s.rules.push_back(std::move(r));
      }
      scopes.push_back(std::move(s));
    }
    p.egress = std::move(scopes);
    return p;
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
}

std::string rule_summary(const PolicyRule& r) {
  std::string s = std::string(r.action == Verdict::Allow ? "allow " : "deny ") + (r.cidr ? r.cidr->str() : r.host);
  if (!r.ports.empty()) {
    s += " ports ";
    for (size_t i = 0; i < r.ports.size(); ++i) s += (i ? "," : "") + rule_port_text(r.ports[i]);
  }
  if (r.proto) s += " " + proto_word(r.proto);
  return s;
}

std::string scope_settings(const EgressScope& s) {
  return std::string(s.mode == PolicyMode::Enforce ? "enforce" : "monitor") + ", default " +
         (s.default_allow ? "allow" : "deny") + ", deny errno " + errno_name(s.deny_errno) +
         (s.exfil_cap ? ", exfil cap " + std::to_string(s.exfil_cap) + " B" : "") +
         (s.dns_ttl_min != EgressScope{}.dns_ttl_min || s.dns_ttl_max != EgressScope{}.dns_ttl_max
              ? ", dns ttl " + std::to_string(s.dns_ttl_min) + "s-" + std::to_string(s.dns_ttl_max) + "s"
              : "");
}

}  // namespace faultline
