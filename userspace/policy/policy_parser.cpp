// The policy file from YAML or JSON (one parser: JSON is YAML) into the model,
// every error kept with the line and column yaml-cpp marks it at.
#include <netinet/in.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/errno_names.h"
#include "userspace/guard/dlp_validators.h"
#include "userspace/policy/guard_section.h"
#include "userspace/policy/policy.h"

namespace faultline {
namespace policy_parse {

SourceMark mark_of(const YAML::Node& n, SourceMark fallback) {
  const YAML::Mark m = n.Mark();
  if (m.line < 0 || m.column < 0) return fallback;
  return {m.line + 1, m.column + 1};
}

std::string kind_text(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "'" + n.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

// A plain (unquoted) scalar: numbers and true/false must be written plain.
bool plain_scalar(const YAML::Node& n) { return n.IsScalar() && n.Tag() != "!"; }

// A strict JSON document read by nlohmann (ordered: the file's order of
// fields), seen through the few calls of YAML::Node the Reader makes, so a
// JSON file is read by the same Reader at a fraction of yaml-cpp's time. It
// has no marks: a document with any error is read again through yaml-cpp,
// whose errors carry the line and column.
using OJson = nlohmann::ordered_json;

struct JNode {
  const OJson* j = nullptr;          // a value
  const std::string* key = nullptr;  // or a mapping's key (a scalar)

  [[nodiscard]] bool IsMap() const { return !key && j && j->is_object(); }
  [[nodiscard]] bool IsSequence() const { return !key && j && j->is_array(); }
  [[nodiscard]] bool IsNull() const { return !key && (!j || j->is_null()); }
  [[nodiscard]] bool IsScalar() const { return key || (j && (j->is_string() || j->is_number() || j->is_boolean())); }
  [[nodiscard]] YAML::NodeType::value Type() const {
    return IsMap()        ? YAML::NodeType::Map
           : IsSequence() ? YAML::NodeType::Sequence
           : IsScalar()   ? YAML::NodeType::Scalar
                          : YAML::NodeType::Null;
  }
  // As yaml-cpp gives it: a string's text, a number as written (integers
  // only: a document with a fraction or exponent is left to yaml-cpp).
  [[nodiscard]] std::string Scalar() const {
    if (key) return *key;
    if (!j) return {};
    if (j->is_string()) return j->get_ref<const std::string&>();
    if (j->is_boolean()) return j->get<bool>() ? "true" : "false";
    if (j->is_number()) return j->dump();
    return {};
  }
  // "!" for a quoted scalar (every JSON string), as yaml-cpp tags them.
  [[nodiscard]] std::string Tag() const { return key || (j && j->is_string()) ? "!" : "?"; }
  [[nodiscard]] size_t size() const { return !key && j && j->is_structured() ? j->size() : 0; }

  class Iter;
  [[nodiscard]] Iter begin() const;
  [[nodiscard]] Iter end() const;
};

// Iteration as yaml-cpp's: a sequence's items are nodes, a mapping's are
// (first, second) pairs.
struct JItem : JNode {
  JNode first, second;
};

class JNode::Iter {
 public:
  Iter(OJson::const_iterator it, bool map) : it_(it), map_(map) {}
  const JItem& operator*() const { return fill(); }
  const JItem* operator->() const { return &fill(); }
  Iter& operator++() {
    ++it_;
    return *this;
  }
  bool operator==(const Iter& o) const { return it_ == o.it_; }
  bool operator!=(const Iter& o) const { return it_ != o.it_; }

 private:
  const JItem& fill() const {
    if (map_) {
      cur_.first = JNode{nullptr, &it_.key()};
      cur_.second = JNode{&it_.value(), nullptr};
    } else {
      cur_.j = &*it_;
    }
    return cur_;
  }
  OJson::const_iterator it_;
  bool map_;
  mutable JItem cur_;
};

const OJson& structured_or_empty(const JNode& n) {
  static const OJson empty = OJson::array();
  return n.IsMap() || n.IsSequence() ? *n.j : empty;
}
JNode::Iter JNode::begin() const {
  const OJson& v = structured_or_empty(*this);
  return Iter(v.cbegin(), v.is_object());
}
JNode::Iter JNode::end() const {
  const OJson& v = structured_or_empty(*this);
  return Iter(v.cend(), v.is_object());
}

SourceMark mark_of(const JNode&, SourceMark fallback) { return fallback; }

std::string kind_text(const JNode& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return "'" + n.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

bool plain_scalar(const JNode& n) { return n.IsScalar() && n.Tag() != "!"; }

// The document when the text is strict JSON the fast path may read: an
// object at the top, every mapping's fields distinct (nlohmann keeps the last
// of a repeated one, yaml-cpp's reader reports it), no fractional number.
// What the fast path leaves to yaml-cpp, found in one SAX pass (nlohmann's
// DOM parser keeps the last of a repeated field silently, and its callback
// parser rescans a list at every item's end: quadratic at 100k rules).
struct StrictJsonCheck {
  std::vector<std::vector<std::string>> keys;  // per open mapping (a few fields each)
  bool fallback = false;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(OJson::number_integer_t) { return true; }
  bool number_unsigned(OJson::number_unsigned_t) { return true; }
  bool number_float(OJson::number_float_t, const std::string&) { return !(fallback = true); }
  bool string(std::string&) { return true; }
  bool binary(OJson::binary_t&) { return !(fallback = true); }
  bool start_object(std::size_t) {
    keys.emplace_back();
    return true;
  }
  bool key(std::string& k) {
    auto& seen = keys.back();
    // A policy's mappings have a few fields; a wide one (an error anyway) goes to yaml-cpp.
    if (seen.size() >= 64 || std::find(seen.begin(), seen.end(), k) != seen.end()) return !(fallback = true);
    seen.push_back(k);
    return true;
  }
  bool end_object() {
    keys.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return !(fallback = true); }
};

// The document when the text is strict JSON the fast path may read: an
// object at the top, every mapping's fields distinct, no fractional number.
std::optional<OJson> strict_json(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') return std::nullopt;
  StrictJsonCheck check;
  if (!OJson::sax_parse(text.begin(), text.end(), &check) || check.fallback) return std::nullopt;
  OJson j = OJson::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// The fields of one mapping, read once, checked against what the level knows.
template <class N>
struct Fields {
  std::map<std::string, std::pair<N, N>> by_name;  // name -> (key, value)
  SourceMark mark;
};

template <class N>
class Reader {
 public:
  using Fields = policy_parse::Fields<N>;

  std::vector<PolicyDiagnostic> errors;

  void error(SourceMark m, std::string path, std::string reason) {
    errors.push_back({m, std::move(path), std::move(reason)});
  }

  // The fields of a mapping at path; unknown and repeated names are errors.
  std::optional<Fields> mapping(const N& n, const std::string& path, SourceMark parent,
                                const std::vector<std::string>& known) {
    if (!n.IsMap()) {
      error(mark_of(n, parent), path, "expected a mapping, found " + kind_text(n));
      return std::nullopt;
    }
    Fields f;
    f.mark = mark_of(n, parent);
    for (auto it = n.begin(); it != n.end(); ++it) {
      const N key = it->first;
      const SourceMark km = mark_of(key, f.mark);
      if (!key.IsScalar()) {
        error(km, path.empty() ? "<document>" : path, "a field name must be a plain word, found " + kind_text(key));
        continue;
      }
      const std::string name = key.Scalar();
      const std::string at = join(path, name);
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::string why = "unknown field '" + name + "'";
        if (auto near = closest_name(name, known); !near.empty()) why += " (did you mean '" + near + "'?)";
        error(km, at, why);
        continue;
      }
      const N value = it->second;
      if (!f.by_name.emplace(name, std::make_pair(key, value)).second)
        error(km, at, "repeated field (each field once)");
    }
    return f;
  }

  static std::string join(const std::string& path, const std::string& name) {
    return path.empty() ? name : path + "." + name;
  }

  // A required string field; nullopt (and an error) when missing or not a string.
  std::optional<std::string> text(const Fields& f, const std::string& path, const std::string& name, bool required) {
    auto it = f.by_name.find(name);
    if (it == f.by_name.end()) {
      if (required) error(f.mark, join(path, name), "missing (required)");
      return std::nullopt;
    }
    const N& v = it->second.second;
    if (!v.IsScalar()) {
      error(mark_of(v, mark_of(it->second.first, f.mark)), join(path, name), "expected text, found " + kind_text(v));
      return std::nullopt;
    }
    return v.Scalar();
  }

  std::optional<bool> boolean(const Fields& f, const std::string& path, const std::string& name) {
    auto it = f.by_name.find(name);
    if (it == f.by_name.end()) return std::nullopt;
    const N& v = it->second.second;
    if (plain_scalar(v) && (v.Scalar() == "true" || v.Scalar() == "false")) return v.Scalar() == "true";
    error(mark_of(v, mark_of(it->second.first, f.mark)), join(path, name),
          "expected true or false, found " + kind_text(v));
    return std::nullopt;
  }

  SourceMark value_mark(const Fields& f, const std::string& name) const {
    auto it = f.by_name.find(name);
    if (it == f.by_name.end()) return f.mark;
    return mark_of(it->second.second, mark_of(it->second.first, f.mark));
  }

  SourceMark key_mark(const Fields& f, const std::string& name) const {
    auto it = f.by_name.find(name);
    if (it == f.by_name.end()) return f.mark;
    return mark_of(it->second.first, f.mark);
  }

  // A list field; nullopt (and an error) when it is not a list.
  std::optional<N> list(const Fields& f, const std::string& path, const std::string& name, bool required) {
    auto it = f.by_name.find(name);
    if (it == f.by_name.end()) {
      if (required) error(f.mark, join(path, name), "missing (required)");
      return std::nullopt;
    }
    const N& v = it->second.second;
    if (!v.IsSequence()) {
      error(mark_of(v, mark_of(it->second.first, f.mark)), join(path, name),
            "expected a list, found " + kind_text(v) + (v.IsNull() ? " (write [] for none)" : ""));
      return std::nullopt;
    }
    return v;
  }

  void read_metadata(const N& n, SourceMark parent, Policy& p);
  void read_scope(const N& n, const std::string& path, SourceMark parent, EgressScope& s);
  void read_rule(const N& n, const std::string& path, SourceMark parent, PolicyRule& r);
  void read_fault(const N& n, const std::string& path, SourceMark parent, FaultEntry& e);
  void read_guard(const N& n, const std::string& path, SourceMark parent, GuardPolicy& g);
  void read_guard_rule(const N& n, const std::string& path, SourceMark parent, GuardRule& r);
  void read_mcp_arg(const N& n, const std::string& path, SourceMark parent, McpArgMatcher& m);
};

// metadata.name and rule names: a word a report can show and a map can key.
bool valid_name(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  if (!std::isalnum(static_cast<unsigned char>(s.front()))) return false;
  return s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == std::string::npos;
}

// "api.example.com" or "*.example.com": labels of 1-63 letters, digits and
// hyphens (not at either end), 253 characters at most, at least two labels.
std::optional<std::string> host_problem(const std::string& h) {
  std::string name = h.starts_with("*.") ? h.substr(2) : h;
  if (name.find('*') != std::string::npos) return "a wildcard is only '*.' at the start (*.example.com)";
  if (name.empty()) return "no name";
  if (name.size() > 253) return "longer than 253 characters";
  if (name.back() == '.') return "write the name without the trailing dot";
  size_t start = 0, labels = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    std::string label = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty()) return "an empty label (two dots in a row, or a leading dot)";
    if (label.size() > 63) return "a label longer than 63 characters";
    if (label.front() == '-' || label.back() == '-') return "a label starts or ends with '-'";
    if (label.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
      return "'" + label + "': letters, digits and '-' only (lowercase)";
    ++labels;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (labels < 2 && h.starts_with("*.")) return "a wildcard needs a suffix of two labels at least (*.example.com)";
  if (name.find_first_not_of("0123456789.") == std::string::npos) return "an address: write it as cidr";
  return std::nullopt;
}

const std::vector<std::string> kTopFields = {"apiVersion", "kind", "metadata", "spec"};
const std::vector<std::string> kMetadataFields = {"name", "description"};
const std::vector<std::string> kSpecFields = {"egress", "faults", "guard"};
const std::vector<std::string> kGuardFields = {"mode", "default_allow", "rules"};
const std::vector<std::string> kGuardRuleFields = {"name",          "action",       "reason",    "host",
                                                   "path",          "method",       "llm_model", "llm_max_tokens_over",
                                                   "dlp_type",      "mcp_tool",     "mcp_args",  "sql_verb",
                                                   "sql_table",     "sql_function", "k8s_verb",  "k8s_resource",
                                                   "k8s_namespace", "k8s_name"};
const std::vector<std::string> kMcpArgFields = {"arg", "prefix", "equals", "regex", "over"};
const std::vector<std::string> kScopeFields = {"cgroup",    "all",         "mode",        "default_allow", "deny_errno",
                                               "exfil_cap", "dns_ttl_min", "dns_ttl_max", "rules"};

// A DNS TTL bound: a duration in whole seconds, 1s to 7d.
std::optional<uint32_t> ttl_seconds(const std::string& v, std::string& why) {
  auto ns = parse_duration_ns(v);
  if (!ns) {
    why = ns.error().message;
    return std::nullopt;
  }
  if (*ns % 1000000000ULL != 0 || *ns < 1000000000ULL || *ns > 7ULL * 86400 * 1000000000ULL) {
    why = "'" + v + "': whole seconds from 1s to 7d";
    return std::nullopt;
  }
  return static_cast<uint32_t>(*ns / 1000000000ULL);
}
const std::vector<std::string> kRuleFields = {"name", "action", "cidr", "host", "ports", "proto", "reason"};

template <class N>
void Reader<N>::read_metadata(const N& n, SourceMark parent, Policy& p) {
  auto f = mapping(n, "metadata", parent, kMetadataFields);
  if (!f) return;
  if (auto name = text(*f, "metadata", "name", true)) {
    if (!valid_name(*name, 253))
      error(value_mark(*f, "name"), "metadata.name",
            "'" + *name + "': letters, digits, '-', '_' and '.', starting with a letter or digit, at most 253");
    else
      p.name = *name;
  }
  (void)text(*f, "metadata", "description", false);
}

template <class N>
void Reader<N>::read_rule(const N& n, const std::string& path, SourceMark parent, PolicyRule& r) {
  auto f = mapping(n, path, parent, kRuleFields);
  if (!f) return;
  r.mark = f->mark;
  if (auto name = text(*f, path, "name", true)) {
    if (!valid_name(*name, 63))
      error(value_mark(*f, "name"), path + ".name",
            "'" + *name + "': letters, digits, '-', '_' and '.', starting with a letter or digit, at most 63");
    r.name = *name;
    r.name_mark = value_mark(*f, "name");
  }
  if (auto action = text(*f, path, "action", true)) {
    if (*action == "allow")
      r.action = Verdict::Allow;
    else if (*action == "deny")
      r.action = Verdict::Deny;
    else
      error(value_mark(*f, "action"), path + ".action", "'" + *action + "': expected allow or deny");
  }
  const bool has_cidr = f->by_name.contains("cidr"), has_host = f->by_name.contains("host");
  if (has_cidr && has_host) {
    error(key_mark(*f, "host"), path, "give one of cidr and host, not both");
  } else if (!has_cidr && !has_host) {
    error(f->mark, path, "missing the destination: give cidr (10.0.0.0/8) or host (api.example.com, *.example.com)");
  } else if (has_cidr) {
    if (auto c = text(*f, path, "cidr", true)) {
      auto p = parse_prefix(*c);
      if (!p)
        error(value_mark(*f, "cidr"), path + ".cidr", p.error().message);
      else
        r.cidr = *p;
    }
  } else if (auto h = text(*f, path, "host", true)) {
    std::string lower = *h;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (auto why = host_problem(lower))
      error(value_mark(*f, "host"), path + ".host", "'" + *h + "': " + *why);
    else
      r.host = lower;
  }
  if (auto ports = list(*f, path, "ports", false)) {
    if (ports->size() == 0)
      error(value_mark(*f, "ports"), path + ".ports", "an empty list: leave ports out for any port");
    size_t i = 0;
    for (const auto& item : *ports) {
      const std::string at = path + ".ports[" + std::to_string(i++) + "]";
      if (!item.IsScalar()) {
        error(mark_of(item, value_mark(*f, "ports")), at,
              "expected a port (443) or a range (8000-8100), found " + kind_text(item));
        continue;
      }
      auto pr = parse_port_range(item.Scalar());
      if (!pr)
        error(mark_of(item, value_mark(*f, "ports")), at, pr.error().message);
      else
        r.ports.push_back(*pr);
    }
  }
  if (auto proto = text(*f, path, "proto", false)) {
    if (*proto == "tcp")
      r.proto = IPPROTO_TCP;
    else if (*proto == "udp")
      r.proto = IPPROTO_UDP;
    else
      error(value_mark(*f, "proto"), path + ".proto", "'" + *proto + "': expected tcp or udp (leave it out for both)");
  }
  if (auto reason = text(*f, path, "reason", false)) r.reason = *reason;
}

template <class N>
void Reader<N>::read_scope(const N& n, const std::string& path, SourceMark parent, EgressScope& s) {
  auto f = mapping(n, path, parent, kScopeFields);
  if (!f) return;
  s.mark = f->mark;
  const bool has_cgroup = f->by_name.contains("cgroup"), has_all = f->by_name.contains("all");
  if (has_cgroup && has_all) {
    error(key_mark(*f, "all"), path, "give one of cgroup and all, not both");
  } else if (!has_cgroup && !has_all) {
    error(f->mark, path, "missing the scope: give cgroup: PATH or all: true");
  } else if (has_all) {
    if (auto all = boolean(*f, path, "all")) {
      if (!*all)
        error(value_mark(*f, "all"), path + ".all", "all: false selects nothing: write all: true or cgroup: PATH");
      s.host_wide = *all;
    }
  } else if (auto cg = text(*f, path, "cgroup", true)) {
    if (cg->empty() || cg->front() != '/')
      error(value_mark(*f, "cgroup"), path + ".cgroup",
            "'" + *cg + "': a path below the cgroup2 root, starting with / (/system.slice/web.service)");
    else if (cg->find("/../") != std::string::npos || cg->ends_with("/..") || cg->find("//") != std::string::npos)
      error(value_mark(*f, "cgroup"), path + ".cgroup", "'" + *cg + "': no '..' or empty components");
    else {
      s.cgroup = *cg;
      while (s.cgroup.size() > 1 && s.cgroup.back() == '/') s.cgroup.pop_back();
    }
  }
  if (auto mode = text(*f, path, "mode", false)) {
    if (*mode == "monitor")
      s.mode = PolicyMode::Monitor;
    else if (*mode == "enforce")
      s.mode = PolicyMode::Enforce;
    else
      error(value_mark(*f, "mode"), path + ".mode", "'" + *mode + "': expected monitor or enforce");
  }
  if (auto d = boolean(*f, path, "default_allow")) s.default_allow = *d;
  if (auto e = text(*f, path, "deny_errno", false)) {
    if (auto v = errno_from_name(*e))
      s.deny_errno = *v;
    else
      error(value_mark(*f, "deny_errno"), path + ".deny_errno",
            "'" + *e + "': not a known errno name (EPERM, ECONNREFUSED, EACCES, ...)");
  }
  if (auto c = text(*f, path, "exfil_cap", false)) {
    auto b = parse_size_bytes(*c);
    if (!b)
      error(value_mark(*f, "exfil_cap"), path + ".exfil_cap", b.error().message);
    else if (*b == 0)
      error(value_mark(*f, "exfil_cap"), path + ".exfil_cap", "must be above 0 (leave it out for no cap)");
    else
      s.exfil_cap = *b;
  }
  bool ttl_ok = true;
  for (const char* field : {"dns_ttl_min", "dns_ttl_max"}) {
    if (auto t = text(*f, path, field, false)) {
      std::string why;
      auto sec = ttl_seconds(*t, why);
      if (!sec) {
        error(value_mark(*f, field), path + "." + field, why);
        ttl_ok = false;
      } else {
        (std::string(field) == "dns_ttl_min" ? s.dns_ttl_min : s.dns_ttl_max) = *sec;
      }
    }
  }
  if (ttl_ok && s.dns_ttl_min > s.dns_ttl_max)
    error(value_mark(*f, f->by_name.contains("dns_ttl_max") ? "dns_ttl_max" : "dns_ttl_min"), path + ".dns_ttl_max",
          "below dns_ttl_min (" + std::to_string(s.dns_ttl_min) + "s): the clamp would be empty");
  if (auto rules = list(*f, path, "rules", false)) {
    s.rules.reserve(rules->size());
    size_t i = 0;
    std::map<std::string, size_t> names;
    for (const auto& item : *rules) {
      const std::string at = path + ".rules[" + std::to_string(i) + "]";
      PolicyRule r;
      const size_t before = errors.size();
      read_rule(item, at, value_mark(*f, "rules"), r);
      if (!r.name.empty()) {
        auto [it, fresh] = names.emplace(r.name, i);
        if (!fresh)
          error(r.name_mark, at + ".name",
                "'" + r.name + "' is also the name of rules[" + std::to_string(it->second) + "]");
      }
      if (errors.size() == before) s.rules.push_back(std::move(r));
      ++i;
    }
  }
}

template <class N>
void Reader<N>::read_fault(const N& n, const std::string& path, SourceMark parent, FaultEntry& e) {
  if (!n.IsMap()) {
    error(mark_of(n, parent), path, "expected a mapping, found " + kind_text(n));
    return;
  }
  e.mark = mark_of(n, parent);
  bool has_name = false, has_kind = false;
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const N key = it->first;
    const N v = it->second;
    const SourceMark km = mark_of(key, e.mark);
    if (!key.IsScalar()) {
      error(km, path, "a field name must be a plain word, found " + kind_text(key));
      continue;
    }
    const std::string name = key.Scalar();
    const std::string at = path + "." + name;
    if (!seen.insert(name).second) {
      error(km, at, "repeated field (each field once)");
      continue;
    }
    if (name == "name" || name == "kind") {
      if (!v.IsScalar() || v.Scalar().empty()) {
        error(mark_of(v, km), at, "expected text, found " + kind_text(v));
        continue;
      }
      if (name == "name") {
        has_name = true;
        e.name = v.Scalar();
        if (!valid_name(e.name, 63))
          error(mark_of(v, km), at,
                "'" + e.name + "': letters, digits, '-', '_' and '.', starting with a letter or digit, at most 63");
      } else {
        has_kind = true;
        e.kind = v.Scalar();
        e.kind_mark = mark_of(v, km);
      }
      continue;
    }
    if (name == "command") {
      if (!v.IsSequence() || v.size() == 0) {
        error(mark_of(v, km), at, "expected the command as a non-empty list of words ([./app, --flag])");
        continue;
      }
      for (const auto& w : v) {
        if (!w.IsScalar()) {
          error(mark_of(w, km), at, "expected a word, found " + kind_text(w));
          continue;
        }
        e.command.push_back(w.Scalar());
      }
      continue;
    }
    FaultField field;
    field.name = name;
    field.mark = km;
    if (v.IsScalar()) {
      if (plain_scalar(v) && v.Scalar() == "true") field.is_switch = true;
      field.values.push_back(v.Scalar());
      field.value_marks.push_back(mark_of(v, km));
    } else if (v.IsSequence() && v.size() > 0) {
      field.is_list = true;
      for (const auto& w : v) {
        if (!w.IsScalar()) {
          error(mark_of(w, km), at, "expected a value, found " + kind_text(w));
          continue;
        }
        field.values.push_back(w.Scalar());
        field.value_marks.push_back(mark_of(w, km));
      }
    } else {
      error(mark_of(v, km), at, "expected a value or a non-empty list of values, found " + kind_text(v));
      continue;
    }
    e.fields.push_back(std::move(field));
  }
  if (!has_name) error(e.mark, path + ".name", "missing (required)");
  if (!has_kind)
    error(e.mark, path + ".kind",
          "missing (required): loss, latency, partition, ..., syscall, process, cpu, memory, disk");
}

// spec.guard, or the bare section ({mode, default_allow, rules}) at path "".
template <class N>
void Reader<N>::read_guard(const N& n, const std::string& path, SourceMark parent, GuardPolicy& g) {
  auto f = mapping(n, path, parent, kGuardFields);
  if (!f) return;
  if (auto mode = text(*f, path, "mode", false)) {
    if (*mode == "monitor")
      g.mode = GuardMode::Monitor;
    else if (*mode == "enforce")
      g.mode = GuardMode::Enforce;
    else
      error(value_mark(*f, "mode"), join(path, "mode"), "'" + *mode + "': expected monitor or enforce");
  }
  if (auto d = boolean(*f, path, "default_allow")) g.default_allow = *d;
  auto rules = list(*f, path, "rules", false);
  if (!rules) return;
  const std::string rules_path = join(path, "rules");
  std::map<std::string, size_t> names;
  size_t i = 0;
  for (const auto& item : *rules) {
    const std::string at = rules_path + "[" + std::to_string(i) + "]";
    GuardRule r;
    const size_t before = errors.size();
    read_guard_rule(item, at, value_mark(*f, "rules"), r);
    if (!r.name.empty()) {
      auto [it, fresh] = names.emplace(r.name, i);
      if (!fresh)
        error(mark_of(item, value_mark(*f, "rules")), at + ".name",
              "'" + r.name + "' is also the name of rules[" + std::to_string(it->second) + "]");
    }
    if (errors.size() == before) g.rules.push_back(std::move(r));
    ++i;
  }
}

template <class N>
void Reader<N>::read_guard_rule(const N& n, const std::string& path, SourceMark parent, GuardRule& r) {
  auto f = mapping(n, path, parent, kGuardRuleFields);
  if (!f) return;
  if (auto name = text(*f, path, "name", true)) {
    if (!valid_name(*name, 63))
      error(value_mark(*f, "name"), path + ".name",
            "'" + *name + "': letters, digits, '-', '_' and '.', starting with a letter or digit, at most 63");
    else
      r.name = *name;
  }
  if (auto action = text(*f, path, "action", true)) {
    if (auto v = guard_verdict_from_name(*action))
      r.action = *v;
    else
      error(value_mark(*f, "action"), path + ".action", "'" + *action + "': expected allow, deny or approve");
  }
  if (auto reason = text(*f, path, "reason", false)) r.reason = *reason;
  if (auto host = text(*f, path, "host", false)) {
    auto m = parse_host_matcher(*host);
    if (!m)
      error(value_mark(*f, "host"), path + ".host", m.error().message);
    else
      r.host = std::move(*m);
  }
  if (auto sub = text(*f, path, "path", false)) {
    if (sub->empty())
      error(value_mark(*f, "path"), path + ".path", "empty: leave path out to match any path");
    else
      r.path = *sub;
  }
  if (auto method = text(*f, path, "method", false)) {
    auto m = parse_method(*method);
    if (!m)
      error(value_mark(*f, "method"), path + ".method", m.error().message);
    else
      r.method = std::move(*m);
  }
  if (auto model = text(*f, path, "llm_model", false)) {
    if (model->empty() || *model == "*")
      error(value_mark(*f, "llm_model"), path + ".llm_model", "'" + *model + "': a model name, or a prefix and '*'");
    else
      r.llm_model = *model;
  }
  if (auto it = f->by_name.find("llm_max_tokens_over"); it != f->by_name.end()) {
    const N& v = it->second.second;
    const std::string digits = v.IsScalar() ? v.Scalar() : "";
    if (!plain_scalar(v) || digits.empty() || digits.size() > 18 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      error(value_mark(*f, "llm_max_tokens_over"), path + ".llm_max_tokens_over",
            "expected a whole number of tokens, found " + kind_text(v));
    else
      r.llm_max_tokens_over = std::stoull(digits);
  }
  if (auto type = text(*f, path, "dlp_type", false)) {
    if (*type != "any" && !dlp_type_from_name(*type))
      error(value_mark(*f, "dlp_type"), path + ".dlp_type",
            "'" + *type + "': a detector (docs/detectors.md: aws_access_key, ..., email) or any");
    else
      r.dlp_type = *type;
  }
  if (auto tool = text(*f, path, "mcp_tool", false)) {
    if (auto st = check_mcp_glob(*tool); !st)
      error(value_mark(*f, "mcp_tool"), path + ".mcp_tool", st.error().message);
    else
      r.mcp_tool = *tool;
  }
  if (auto args = list(*f, path, "mcp_args", false)) {
    size_t i = 0;
    for (const auto& item : *args) {
      McpArgMatcher m;
      const size_t before = errors.size();
      read_mcp_arg(item, path + ".mcp_args[" + std::to_string(i++) + "]", value_mark(*f, "mcp_args"), m);
      if (errors.size() == before) r.mcp_args.push_back(std::move(m));
    }
    if (i == 0)
      error(value_mark(*f, "mcp_args"), path + ".mcp_args", "empty: leave mcp_args out to match any arguments");
  }
  if (auto verb = text(*f, path, "sql_verb", false)) {
    auto v = parse_sql_verb(*verb);
    if (!v)
      error(value_mark(*f, "sql_verb"), path + ".sql_verb", v.error().message);
    else
      r.sql_verb = std::move(*v);
  }
  for (const char* field : {"sql_table", "sql_function"}) {
    if (auto glob = text(*f, path, field, false)) {
      auto g = parse_sql_glob(*glob);
      if (!g)
        error(value_mark(*f, field), path + "." + field, g.error().message);
      else
        (std::string_view(field) == "sql_table" ? r.sql_table : r.sql_function) = std::move(*g);
    }
  }
  if (auto verb = text(*f, path, "k8s_verb", false)) {
    auto v = parse_k8s_verb(*verb);
    if (!v)
      error(value_mark(*f, "k8s_verb"), path + ".k8s_verb", v.error().message);
    else
      r.k8s_verb = std::move(*v);
  }
  for (const char* field : {"k8s_resource", "k8s_namespace", "k8s_name"}) {
    if (auto glob = text(*f, path, field, false)) {
      const std::string_view name(field);
      auto g = parse_k8s_glob(*glob, name.substr(4));
      if (!g)
        error(value_mark(*f, field), path + "." + field, g.error().message);
      else
        (name == "k8s_resource"    ? r.k8s_resource
         : name == "k8s_namespace" ? r.k8s_namespace
                                   : r.k8s_name) = std::move(*g);
    }
  }
  const bool k8s = f->by_name.contains("k8s_verb") || f->by_name.contains("k8s_resource") ||
                   f->by_name.contains("k8s_namespace") || f->by_name.contains("k8s_name");
  const bool mcp = f->by_name.contains("mcp_tool") || f->by_name.contains("mcp_args");
  const bool sql =
      f->by_name.contains("sql_verb") || f->by_name.contains("sql_table") || f->by_name.contains("sql_function");
  if (k8s && (sql || mcp)) {
    error(key_mark(*f, sql ? (f->by_name.contains("sql_verb")    ? "sql_verb"
                              : f->by_name.contains("sql_table") ? "sql_table"
                                                                 : "sql_function")
                           : (f->by_name.contains("mcp_tool") ? "mcp_tool" : "mcp_args")),
          path,
          "a Kubernetes rule (k8s_verb, k8s_resource, k8s_namespace, k8s_name) judges HTTP requests to an API "
          "server, not SQL statements or MCP calls: write it as a rule of its own");
  } else if (sql) {
    for (const char* other :
         {"host", "path", "method", "llm_model", "llm_max_tokens_over", "dlp_type", "mcp_tool", "mcp_args"})
      if (f->by_name.contains(other))
        error(key_mark(*f, other), path + "." + other,
              "a SQL rule (sql_verb, sql_table, sql_function) judges statements over the Postgres wire, which have "
              "no " +
                  std::string(other) + ": write it as a rule of its own");
  } else if (mcp) {
    for (const char* http : {"host", "path", "method", "llm_model", "llm_max_tokens_over", "dlp_type"})
      if (f->by_name.contains(http))
        error(key_mark(*f, http), path + "." + http,
              "an MCP rule (mcp_tool, mcp_args) judges tools/call, which has no " + std::string(http) +
                  ": write it as a rule of its own");
  } else if (!k8s && !f->by_name.contains("host") && !f->by_name.contains("path") && !f->by_name.contains("method") &&
             !f->by_name.contains("llm_model") && !f->by_name.contains("llm_max_tokens_over") &&
             !f->by_name.contains("dlp_type")) {
    error(f->mark, path,
          "no matcher: give host, path, method, llm_model, llm_max_tokens_over or dlp_type, for MCP mcp_tool or "
          "mcp_args, for SQL sql_verb, sql_table or sql_function, for Kubernetes k8s_verb, k8s_resource, "
          "k8s_namespace or k8s_name (default_allow decides the rest)");
  }
}

// One matcher of an MCP rule's arguments: {arg: POINTER, and one of prefix,
// equals, regex, over}.
template <class N>
void Reader<N>::read_mcp_arg(const N& n, const std::string& path, SourceMark parent, McpArgMatcher& m) {
  auto f = mapping(n, path, parent, kMcpArgFields);
  if (!f) return;
  if (auto arg = text(*f, path, "arg", true)) {
    if (auto st = check_json_pointer(*arg); !st)
      error(value_mark(*f, "arg"), path + ".arg", st.error().message);
    else
      m.pointer = *arg;
  }
  std::vector<std::string> tests;
  for (const char* t : {"prefix", "equals", "regex", "over"})
    if (f->by_name.contains(t)) tests.emplace_back(t);
  if (tests.size() != 1) {
    error(f->mark, path,
          tests.empty() ? "no test: give one of prefix, equals, regex or over"
                        : "give one test, found " + std::to_string(tests.size()) + " (" + tests[0] + ", " + tests[1] +
                              "): write one matcher per test");
    return;
  }
  const std::string& t = tests[0];
  auto value = text(*f, path, t, true);
  if (!value) return;
  m.text = *value;
  if (t == "prefix") {
    m.test = McpArgMatcher::Test::Prefix;
    if (value->empty()) error(value_mark(*f, t), path + ".prefix", "empty: leave the matcher out to match any value");
  } else if (t == "equals") {
    m.test = McpArgMatcher::Test::Equals;
  } else if (t == "regex") {
    m.test = McpArgMatcher::Test::Regex;
    auto re = compile_mcp_regex(*value);
    if (!re)
      error(value_mark(*f, t), path + ".regex", re.error().message);
    else
      m.regex = std::move(*re);
  } else {
    m.test = McpArgMatcher::Test::Over;
    char* end = nullptr;
    errno = 0;
    const double d = value->empty() ? 0 : std::strtod(value->c_str(), &end);
    if (value->empty() || end != value->c_str() + value->size() || errno != 0 || !std::isfinite(d) ||
        value->find_first_of("xXnN") != std::string::npos)
      error(value_mark(*f, t), path + ".over", "'" + *value + "': expected a number (10, 2.5, -1)");
    else
      m.number = d;
  }
}

// Overlaps the sockaddr tries cannot hold, found by compiling each scope's
// address rules as the guard would.
template <class R>
void check_compilable(R& rd, const EgressScope& s, const std::string& path) {
  std::vector<EgressRule> expanded;
  for (const auto& r : s.rules) {
    if (!r.cidr) continue;
    std::vector<PortRange> ports = r.ports.empty() ? std::vector<PortRange>{PortRange{}} : r.ports;
    for (const auto& pr : ports) expanded.push_back({r.action, *r.cidr, pr, r.proto, r.name});
  }
  if (expanded.size() > FL_SA_MAX_RULES) {
    rd.error(s.mark, path + ".rules",
             std::to_string(expanded.size()) + " address rules (one per port entry): at most " +
                 std::to_string(FL_SA_MAX_RULES) + " per scope");
    return;
  }
  for (auto v : {Verdict::Deny, Verdict::Allow}) {
    auto t = compile_rules(expanded, v);
    if (!t)
      rd.error(s.mark, path + ".rules", t.error().message + " (one rule per port entry counts)");
    else if (t->entries.size() > FL_SA_MAX_PREFIXES)
      rd.error(s.mark, path + ".rules",
               std::to_string(t->entries.size()) + " distinct " + (v == Verdict::Deny ? "deny" : "allow") +
                   " prefixes: at most " + std::to_string(FL_SA_MAX_PREFIXES) + " per scope");
  }
}

// Aliases (*name) are refused before the tree is read: an alias repeats a
// subtree without repeating its bytes, so a few nested ones make a small file
// stand for millions of rules (and errors). A reviewed policy spells out each
// rule anyway.
class AliasFinder : public YAML::EventHandler {
 public:
  std::optional<SourceMark> first;
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    if (!first) first = SourceMark{m.line + 1, m.column + 1};
  }
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace policy_parse

std::string PolicyDiagnostic::render(std::string_view file) const {
  return std::string(file) + ":" + std::to_string(mark.line) + ":" + std::to_string(mark.column) + ": " + path + ": " +
         reason;
}

Result<std::string> read_policy_text(const std::string& file) {
  std::string text;
  if (file == "-") {
    std::ostringstream in;
    in << std::cin.rdbuf();
    text = std::move(in).str();
  } else {
    // Read in one go: a stream copy of a 10 MB policy costs more than parsing it.
    std::ifstream in(file, std::ios::binary);
    if (!in) return input_error(errno, file + ": cannot read");
    in.seekg(0, std::ios::end);  // fails on a pipe (/dev/stdin): then size -1
    const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
    if (size > static_cast<std::streamoff>(kMaxPolicyBytes))
      return input_error(EFBIG, file + ": larger than " + std::to_string(kMaxPolicyBytes >> 20) + " MiB");
    if (size > 0) {
      text.resize(static_cast<size_t>(size));
      in.seekg(0);
      if (!in.read(text.data(), size)) return input_error(errno, file + ": cannot read");
    } else {
      std::ostringstream rest;  // not a regular file (a pipe): no size up front
      in.clear();
      in.seekg(0);
      rest << in.rdbuf();
      text = std::move(rest).str();
    }
  }
  if (text.size() > kMaxPolicyBytes)
    return input_error(EFBIG, file + ": larger than " + std::to_string(kMaxPolicyBytes >> 20) + " MiB");
  return text;
}

std::string EgressScope::label() const { return host_wide ? "all" : "cgroup " + cgroup; }

std::string closest_name(std::string_view wrong, const std::vector<std::string>& known) {
  // Levenshtein distance, case-insensitive; close means at most a third of the word.
  auto lower = [](std::string_view s) {
    std::string o(s);
    std::transform(o.begin(), o.end(), o.begin(), [](unsigned char c) { return std::tolower(c); });
    return o;
  };
  const std::string a = lower(wrong);
  std::string best;
  size_t best_d = std::max<size_t>(2, a.size() / 3) + 1;
  for (const auto& k : known) {
    const std::string b = lower(k);
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    if (prev[b.size()] < best_d) {
      best_d = prev[b.size()];
      best = k;
    }
  }
  return best;
}

namespace policy_parse {

// The document's model and every problem in it; the caller sorts the errors.
template <class N>
void read_document(const N& doc, const FaultChecker& check_fault, PolicyParse& out) {
  Reader<N> rd;
  const SourceMark top{1, 1};
  auto f = rd.mapping(doc, "", top, kTopFields);
  if (!f) {
    rd.errors.back().path = "<document>";
    out.errors = std::move(rd.errors);
    return;
  }
  if (auto v = rd.text(*f, "", "apiVersion", true); v && *v != kPolicyApiVersion)
    rd.error(rd.value_mark(*f, "apiVersion"), "apiVersion", "'" + *v + "': expected " + std::string(kPolicyApiVersion));
  if (auto k = rd.text(*f, "", "kind", true); k && *k != kPolicyKind)
    rd.error(rd.value_mark(*f, "kind"), "kind", "'" + *k + "': expected " + std::string(kPolicyKind));
  if (auto it = f->by_name.find("metadata"); it != f->by_name.end())
    rd.read_metadata(it->second.second, rd.key_mark(*f, "metadata"), out.policy);
  else
    rd.error(f->mark, "metadata", "missing (required): metadata: {name: NAME}");
  auto spec_it = f->by_name.find("spec");
  if (spec_it == f->by_name.end()) {
    rd.error(f->mark, "spec", "missing (required): spec with egress, faults or both");
  } else if (auto spec = rd.mapping(spec_it->second.second, "spec", rd.key_mark(*f, "spec"), kSpecFields)) {
    if (spec_it->second.second.size() == 0)
      rd.error(spec->mark, "spec", "names none of egress, faults and guard: the policy would change nothing");
    if (auto egress = rd.list(*spec, "spec", "egress", false)) {
      std::vector<EgressScope> scopes;
      std::map<std::string, size_t> labels;
      size_t i = 0;
      for (const auto& item : *egress) {
        const std::string at = "spec.egress[" + std::to_string(i) + "]";
        EgressScope s;
        const size_t before = rd.errors.size();
        rd.read_scope(item, at, rd.value_mark(*spec, "egress"), s);
        if (rd.errors.size() == before) {
          auto [it, fresh] = labels.emplace(s.label(), i);
          if (!fresh)
            rd.error(s.mark, at,
                     s.label() + " is also the scope of spec.egress[" + std::to_string(it->second) +
                         "]: one scope each (merge their rules)");
          else
            check_compilable(rd, s, at);
          scopes.push_back(std::move(s));
        }
        ++i;
      }
      out.policy.egress = std::move(scopes);
    }
    if (auto faults = rd.list(*spec, "spec", "faults", false)) {
      std::vector<FaultEntry> entries;
      std::map<std::string, size_t> names;
      size_t i = 0;
      for (const auto& item : *faults) {
        const std::string at = "spec.faults[" + std::to_string(i) + "]";
        FaultEntry e;
        const size_t before = rd.errors.size();
        rd.read_fault(item, at, rd.value_mark(*spec, "faults"), e);
        if (!e.name.empty()) {
          auto [it, fresh] = names.emplace(e.name, i);
          if (!fresh)
            rd.error(e.mark, at + ".name",
                     "'" + e.name + "' is also the name of spec.faults[" + std::to_string(it->second) + "]");
        }
        if (rd.errors.size() == before && check_fault) {
          auto more = check_fault(e, at);
          rd.errors.insert(rd.errors.end(), more.begin(), more.end());
        }
        entries.push_back(std::move(e));
        ++i;
      }
      out.policy.faults = std::move(entries);
    }
    if (auto it = spec->by_name.find("guard"); it != spec->by_name.end())
      rd.read_guard(it->second.second, "spec.guard", rd.key_mark(*spec, "guard"), out.policy.guard.emplace());
  }
  out.errors = std::move(rd.errors);
}

}  // namespace policy_parse

PolicyParse parse_policy(std::string_view text, const FaultChecker& check_fault) {
  using namespace policy_parse;
  PolicyParse out;
  // Strict JSON first (a written-out or generated policy; yaml-cpp takes
  // seconds over 100k rules); any error, or anything the fast path leaves to
  // yaml-cpp, is read again from the start below, so marks come from there.
  if (auto j = strict_json(text)) {
    read_document(JNode{&*j, nullptr}, check_fault, out);
    if (out.errors.empty()) return out;
    out = PolicyParse{};
  }
  std::vector<YAML::Node> docs;
  try {
    // Aliases are looked for only where there could be one: an alias names
    // an anchor (&name), and yaml-cpp refuses one that names none.
    if (text.find('&') != std::string_view::npos) {
      std::istringstream in{std::string(text)};
      YAML::Parser parser(in);
      AliasFinder aliases;
      while (parser.HandleNextDocument(aliases)) {
      }
      if (aliases.first) {
        out.errors.push_back({*aliases.first, "<document>", "an alias (*name): spell each value out in a policy file"});
        return out;
      }
    }
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    out.errors.push_back(
        {{std::max(e.mark.line, 0) + 1, std::max(e.mark.column, 0) + 1}, "<document>", "not YAML or JSON: " + e.msg});
    return out;
  }
  if (docs.size() > 1) {
    out.errors.push_back({mark_of(docs[1], {1, 1}), "<document>",
                          "one policy per file (found " + std::to_string(docs.size()) + " documents)"});
    return out;
  }
  if (docs.empty() || docs[0].IsNull()) {
    out.errors.push_back({{1, 1}, "<document>", "empty: expected a Policy (apiVersion, kind, metadata, spec)"});
    return out;
  }
  read_document(docs[0], check_fault, out);
  std::stable_sort(out.errors.begin(), out.errors.end(), [](const PolicyDiagnostic& a, const PolicyDiagnostic& b) {
    return std::tie(a.mark.line, a.mark.column) < std::tie(b.mark.line, b.mark.column);
  });
  return out;
}

namespace policy_parse {

// A document is a whole Policy when it says so (its top-level fields); else
// it is the bare guard section.
template <class N>
bool policy_document(const N& doc) {
  if (!doc.IsMap()) return false;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
    if (key == "apiVersion" || key == "kind" || key == "spec") return true;
  }
  return false;
}

// A whole Policy's guard section: the file read as a policy, spec.guard required.
GuardSectionParse guard_of_policy(std::string_view text) {
  PolicyParse p = parse_policy(text);
  GuardSectionParse out;
  out.errors = std::move(p.errors);
  if (out.errors.empty() && !p.policy.guard)
    out.errors.push_back({{1, 1}, "spec.guard", "missing: this policy has no guard section"});
  if (p.policy.guard) out.policy = std::move(*p.policy.guard);
  return out;
}

template <class N>
GuardSectionParse bare_guard(const N& doc) {
  Reader<N> rd;
  GuardSectionParse out;
  rd.read_guard(doc, "", {1, 1}, out.policy);
  if (!rd.errors.empty() && rd.errors.front().path.empty()) rd.errors.front().path = "<document>";
  out.errors = std::move(rd.errors);
  std::stable_sort(out.errors.begin(), out.errors.end(), [](const PolicyDiagnostic& a, const PolicyDiagnostic& b) {
    return std::tie(a.mark.line, a.mark.column) < std::tie(b.mark.line, b.mark.column);
  });
  return out;
}

}  // namespace policy_parse

Result<GuardPolicy> parse_guard_section(const nlohmann::json& j) {
  using namespace policy_parse;
  // Read through the policy file's Reader over nlohmann's ordered form, so
  // errors name fields in the order written and no check is written twice.
  const OJson doc = OJson::parse(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  GuardSectionParse parsed =
      policy_document(JNode{&doc, nullptr}) ? guard_of_policy(doc.dump()) : bare_guard(JNode{&doc, nullptr});
  if (parsed.ok()) return std::move(parsed.policy);
  std::string lines;
  for (const auto& e : parsed.errors) lines += (lines.empty() ? "" : "\n") + e.path + ": " + e.reason;
  return input_error(EINVAL, lines);
}

GuardSectionParse parse_guard_text(std::string_view text) {
  using namespace policy_parse;
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    GuardSectionParse out;
    out.errors.push_back(
        {{std::max(e.mark.line, 0) + 1, std::max(e.mark.column, 0) + 1}, "<document>", "not YAML or JSON: " + e.msg});
    return out;
  }
  if (docs.size() != 1 || docs[0].IsNull()) {
    GuardSectionParse out;
    out.errors.push_back(
        {{1, 1}, "<document>", "expected one guard section ({mode, default_allow, rules}) or one Policy"});
    return out;
  }
  // A Policy goes through parse_policy whole (its alias refusal and every check).
  return policy_document(docs[0]) ? guard_of_policy(text) : bare_guard(docs[0]);
}

}  // namespace faultline
