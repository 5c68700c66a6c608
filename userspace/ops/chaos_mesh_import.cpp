// Chaos Mesh -> the typed experiment. The mapping, field by field:
//   NetworkChaos action delay|loss|duplicate|corrupt|partition|bandwidth -> kind latency|loss|duplicate|corrupt|...
//   externalTargets (addresses, CIDRs, host names: resolved now)     -> target
//   direction to|from|both                                           -> direction egress|ingress|both
//   duration (Go duration, whole seconds)                            -> duration_sec (required here)
//   device                                                           -> dev
//   delay.latency, delay.jitter (whole milliseconds)                 -> delay_ms, jitter_ms
//   loss.loss, loss.correlation                                      -> percent, correlation
//   duplicate.duplicate, corrupt.corrupt                             -> percent
//   bandwidth.rate (tc units: mbps is bytes/s, as ours)              -> rate_bps
//   StressChaos stressors.cpu.workers, .load                         -> kind cpu, cores, load
//   PodChaos action pod-kill, gracePeriod 0, duration                -> kind process, action kill, SIGKILL
//   mode one + selector.labelSelectors {service: NAME}               -> cgroup (the caller's --cgroup)
//   PhysicalMachineChaos (chaosd), on the machine faultctl apply runs on:
//     network-delay|loss|corrupt|duplicate|partition|bandwidth       -> the packet kinds; ip-address and
//       hostname -> target, device -> dev, ip-protocol -> proto, egress-port (A:B) -> port
//     stress-cpu {workers, load}, stress-mem {size}                  -> cpu {cores, load}, memory {size}
//     process {process, signal}                                      -> process kill by pid or name (19: freeze)
//     disk-fill {size (dd units), path}                              -> disk {size, the path's directory}
#include "userspace/ops/chaos_mesh_import.h"

#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "base/units.h"
#include "userspace/faults/spec_fields.h"

namespace faultline {
namespace {

SourceMark mark_at(const YAML::Node& n, SourceMark fallback = {1, 1}) {
  const YAML::Mark m = n.Mark();
  if (m.line < 0 || m.column < 0) return fallback;
  return {m.line + 1, m.column + 1};
}

class ChaosReader {
 public:
  ChaosMeshImport out;
  std::map<std::string, PolicyDiagnostic> where;  // spec field -> the Chaos Mesh field it came from
  std::set<std::string> shared;                   // fields another reader reads, passed over (chaosd's action)

  void error(SourceMark m, std::string path, std::string reason) {
    out.errors.push_back({m, std::move(path), std::move(reason)});
  }

  // The mapping's fields; names outside `known` are errors, with `refused`
  // naming those a host agent cannot honour and what to use instead.
  std::map<std::string, YAML::Node> fields(const YAML::Node& n, const std::string& path, SourceMark at,
                                           const std::set<std::string>& known,
                                           const std::map<std::string, std::string>& refused = {}) {
    std::map<std::string, YAML::Node> f;
    if (!n.IsMap()) {
      error(mark_at(n, at), path.empty() ? "<document>" : path, "expected a mapping");
      return f;
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar()) {
        error(mark_at(it->first, at), path.empty() ? "<document>" : path, "a key must be a name");
        continue;
      }
      const std::string k = it->first.Scalar();
      const std::string p = path.empty() ? k : path + "." + k;
      if (shared.contains(k)) continue;
      if (auto r = refused.find(k); r != refused.end()) {
        if (!(it->second.IsNull() || ((it->second.IsMap() || it->second.IsSequence()) && it->second.size() == 0)))
          error(mark_at(it->first, at), p, r->second);
        continue;
      }
      if (!known.contains(k)) {
        error(
            mark_at(it->first, at), p,
            "not a field Faultline reads from a " + (out.kind.empty() ? std::string("Chaos Mesh document") : out.kind));
        continue;
      }
      if (f.contains(k)) {
        error(mark_at(it->first, at), p, "given twice");
        continue;
      }
      f[k] = it->second;
    }
    return f;
  }

  std::optional<std::string> scalar(const std::map<std::string, YAML::Node>& f, const std::string& k,
                                    const std::string& path, SourceMark at) {
    auto it = f.find(k);
    if (it == f.end()) return std::nullopt;
    if (!it->second.IsScalar() || it->second.Scalar().empty()) {
      error(mark_at(it->second, at), path.empty() ? k : path + "." + k, "expected a value");
      return std::nullopt;
    }
    return it->second.Scalar();
  }

  // One field of the experiment, and where it came from.
  void set(const std::string& field, nlohmann::json value, const std::string& path, SourceMark m) {
    out.spec[field] = std::move(value);
    where[field] = PolicyDiagnostic{m, path, ""};
  }
};

const std::string kSelectorHelp =
    "pod selectors cannot be honoured by a host agent: Faultline acts on this host's own traffic. Remove it, name "
    "the peers in spec.externalTargets, and to narrow the fault to one workload select it with labelSelectors "
    "{service: NAME} and mode one, and give faultctl apply --cgroup PATH";
const std::string kSelectorShort = "pod selectors cannot be honoured by a host agent";

// Percent text as Chaos Mesh writes it ("25", "25.5") -> its number.
std::optional<double> percent_number(const std::string& v) {
  if (v.empty() || v.find_first_not_of("0123456789.") != std::string::npos || v.front() == '.') return std::nullopt;
  try {
    return std::stod(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool zero_text(const std::string& v) { return v.find_first_not_of("0.") == std::string::npos; }

// A number as JSON: an integer when it is whole ("25" -> 25, "2.5" -> 2.5).
nlohmann::json number_json(double v) {
  if (v >= 0 && v <= 1e15 && v == static_cast<double>(static_cast<int64_t>(v))) return static_cast<int64_t>(v);
  return v;
}

// A Go duration ("30s", "2m", "10ms") as a whole number of `unit_ns`; the
// error says why not.
std::optional<std::string> whole_units(const std::string& text, uint64_t unit_ns, const char* unit_name,
                                       uint64_t& out) {
  auto ns = parse_duration_ns(text);
  if (!ns) return "'" + text + "': " + ns.error().message;
  if (*ns % unit_ns != 0) return "'" + text + "': Faultline takes whole " + unit_name;
  out = *ns / unit_ns;
  return std::nullopt;
}

// An externalTargets entry: an address or CIDR as written, a host name as the
// addresses it resolves to now (as faultctl run --target NAME does).
std::optional<std::string> resolve_target(const std::string& t, bool resolve, std::vector<std::string>& out) {
  if (t.find_first_not_of("0123456789abcdefABCDEF.:/") == std::string::npos) {
    out.push_back(t);
    return std::nullopt;
  }
  if (!resolve) return "'" + t + "': a host name, which this reader does not resolve: write its addresses";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(t.c_str(), nullptr, &hints, &res); rc != 0)
    return "'" + t + "': not an address, and the name does not resolve (" + gai_strerror(rc) + ")";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char host[NI_MAXHOST];
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) continue;
    if (std::find(out.begin(), out.end(), host) == out.end()) out.emplace_back(host);
  }
  ::freeaddrinfo(res);
  return std::nullopt;
}

// With options.selectors_by_caller (faultcp): the selectors, read for the
// control plane to resolve against its services and agents.
namespace caller {

const std::string kNoKubernetes =
    "no Kubernetes API is read: faultcp selects registered services (POST /v1/services) by labelSelectors, "
    "expressionSelectors or namespaces (a service's label namespace)";

std::vector<std::string> string_list(ChaosReader& r, const YAML::Node& n, const std::string& path, SourceMark at) {
  std::vector<std::string> out;
  if (!n.IsSequence() || n.size() == 0) {
    r.error(mark_at(n, at), path, "expected a list of names");
    return out;
  }
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar() || n[i].Scalar().empty())
      r.error(mark_at(n[i], at), path + "[" + std::to_string(i) + "]", "expected a name");
    else
      out.push_back(n[i].Scalar());
  }
  return out;
}

std::map<std::string, std::string> string_map(ChaosReader& r, const YAML::Node& n, const std::string& path,
                                              SourceMark at) {
  std::map<std::string, std::string> out;
  if (!n.IsMap() || n.size() == 0) {
    r.error(mark_at(n, at), path, "expected labels (a mapping of names to values)");
    return out;
  }
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar() || !it->second.IsScalar())
      r.error(mark_at(it->first, at), path, "expected a label name and its value");
    else
      out[it->first.Scalar()] = it->second.Scalar();
  }
  return out;
}

std::vector<ChaosMeshExpression> expressions(ChaosReader& r, const YAML::Node& n, const std::string& path,
                                             SourceMark at) {
  std::vector<ChaosMeshExpression> out;
  if (!n.IsSequence() || n.size() == 0) {
    r.error(mark_at(n, at), path, "expected a list of {key, operator, values}");
    return out;
  }
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const SourceMark em = mark_at(n[i], at);
    auto f = r.fields(n[i], p, em, {"key", "operator", "values"});
    ChaosMeshExpression e;
    auto key = r.scalar(f, "key", p, em);
    auto op = r.scalar(f, "operator", p, em);
    if (!key || !op) {
      if (!f.contains("key") || !f.contains("operator")) r.error(em, p, "needs key and operator");
      continue;
    }
    e.key = *key;
    e.op = *op;
    const bool listed = e.op == "In" || e.op == "NotIn";
    if (!listed && e.op != "Exists" && e.op != "DoesNotExist") {
      r.error(mark_at(f["operator"], em), p + ".operator",
              "'" + e.op + "': expected In, NotIn, Exists or DoesNotExist");
      continue;
    }
    if (listed && !f.contains("values")) {
      r.error(em, p + ".values", "missing: " + e.op + " takes the values to compare with");
      continue;
    }
    if (!listed && f.contains("values")) {
      r.error(mark_at(f["values"], em), p + ".values", e.op + " takes no values");
      continue;
    }
    if (listed) e.values = string_list(r, f["values"], p + ".values", em);
    out.push_back(std::move(e));
  }
  return out;
}

// spec.mode and spec.value (or spec.target's): every Chaos Mesh mode.
void read_mode(ChaosReader& r, std::map<std::string, YAML::Node>& spec, const std::string& path, SourceMark sm,
               ChaosMeshSelector& s) {
  if (auto m = r.scalar(spec, "mode", path, sm)) {
    static const std::set<std::string> modes = {"one", "all", "fixed", "fixed-percent", "random-max-percent"};
    if (!modes.contains(*m)) {
      r.error(mark_at(spec["mode"], sm), path + ".mode",
              "'" + *m + "': expected one, all, fixed, fixed-percent or random-max-percent");
      return;
    }
    s.mode = *m;
  }
  const bool fixed = s.mode == "fixed";
  const bool needs = fixed || s.mode == "fixed-percent" || s.mode == "random-max-percent";
  auto v = r.scalar(spec, "value", path, sm);
  if (!needs) {
    if (spec.contains("value"))
      r.error(mark_at(spec["value"], sm), path + ".value", "mode " + s.mode + " takes no value; leave it out");
    return;
  }
  const std::string what = fixed ? "how many to pick, 1-10000" : "a percent, 1-100";
  if (!v) {
    if (!spec.contains("value")) r.error(sm, path + ".value", "missing: mode " + s.mode + " takes " + what);
    return;
  }
  const int64_t top = fixed ? 10000 : 100;
  if (v->empty() || v->size() > 5 || v->find_first_not_of("0123456789") != std::string::npos || std::stoll(*v) < 1 ||
      std::stoll(*v) > top) {
    r.error(mark_at(spec["value"], sm), path + ".value", "'" + *v + "': mode " + s.mode + " takes " + what);
    return;
  }
  s.value = std::stoll(*v);
}

// A workload's selector: services by labels, expressions or namespaces,
// narrowed by the agents (nodes, nodeSelectors) their instances run on.
void read_workloads(ChaosReader& r, const YAML::Node& n, const std::string& path, SourceMark at, ChaosMeshSelector& s) {
  static const std::map<std::string, std::string> refused = {{"pods", kNoKubernetes},
                                                             {"fieldSelectors", kNoKubernetes},
                                                             {"annotationSelectors", kNoKubernetes},
                                                             {"podPhaseSelectors", kNoKubernetes}};
  auto f =
      r.fields(n, path, at, {"namespaces", "labelSelectors", "expressionSelectors", "nodes", "nodeSelectors"}, refused);
  if (f.contains("namespaces")) s.namespaces = string_list(r, f["namespaces"], path + ".namespaces", at);
  if (f.contains("labelSelectors")) s.labels = string_map(r, f["labelSelectors"], path + ".labelSelectors", at);
  if (f.contains("expressionSelectors"))
    s.expressions = expressions(r, f["expressionSelectors"], path + ".expressionSelectors", at);
  if (f.contains("nodes")) s.nodes = string_list(r, f["nodes"], path + ".nodes", at);
  if (f.contains("nodeSelectors")) s.node_labels = string_map(r, f["nodeSelectors"], path + ".nodeSelectors", at);
  if (!f.contains("namespaces") && !f.contains("labelSelectors") && !f.contains("expressionSelectors") &&
      r.out.errors.empty())
    r.error(at, path,
            f.contains("nodes") || f.contains("nodeSelectors")
                ? "nodes and nodeSelectors alone: a node is not a workload; name the services with labelSelectors, "
                  "expressionSelectors or namespaces (nodes then narrows to their instances on those agents)"
                : "missing: the services to fault (labelSelectors, expressionSelectors or namespaces)");
}

// spec.mode, spec.value and spec.selector of a NetworkChaos, StressChaos or
// PodChaos: a selector is required (a whole host is wider than a pod).
void read_selection(ChaosReader& r, std::map<std::string, YAML::Node>& spec, SourceMark sm) {
  ChaosMeshSelector s;
  read_mode(r, spec, "spec", sm, s);
  const bool has_selector = spec.contains("selector") && !spec["selector"].IsNull() &&
                            !(spec["selector"].IsMap() && spec["selector"].size() == 0);
  if (!has_selector)
    r.error(sm, "spec.selector",
            "missing: faultcp faults the instances of the services a selector names (labelSelectors, "
            "expressionSelectors or namespaces), each in its cgroup; a whole host is wider than a pod");
  else
    read_workloads(r, spec["selector"], "spec.selector", mark_at(spec["selector"], sm), s);
  r.out.selector = std::move(s);
}

// A NetworkChaos's spec.target {mode, value, selector}: the services whose
// endpoints are the fault's peers.
void read_target(ChaosReader& r, const YAML::Node& n, SourceMark sm) {
  const SourceMark at = mark_at(n, sm);
  auto f = r.fields(n, "spec.target", at, {"mode", "value", "selector"});
  ChaosMeshSelector t;
  read_mode(r, f, "spec.target", at, t);
  if (!f.contains("selector"))
    r.error(at, "spec.target.selector", "missing: the services whose endpoints are the peers");
  else
    read_workloads(r, f["selector"], "spec.target.selector", mark_at(f["selector"], at), t);
  r.out.target = std::move(t);
}

// A PhysicalMachineChaos's machines: agents by label, name or chaosd address.
void read_machines(ChaosReader& r, std::map<std::string, YAML::Node>& spec, SourceMark sm) {
  ChaosMeshSelector s;
  read_mode(r, spec, "spec", sm, s);
  if (spec.contains("address")) {
    for (const auto& a : string_list(r, spec["address"], "spec.address", sm)) {
      std::string host = a.substr(a.find("://") == std::string::npos ? 0 : a.find("://") + 3);
      if (host.empty()) {
        r.error(mark_at(spec["address"], sm), "spec.address", "'" + a + "': expected chaosd's address, HOST:PORT");
        continue;
      }
      if (host.front() == '[')
        host = host.substr(1, host.find(']') - 1);
      else if (host.find(':') == host.rfind(':'))
        host = host.substr(0, host.find(':'));
      s.addresses.push_back(host.substr(0, host.find('/')));
    }
  }
  const bool has_selector = spec.contains("selector") && !spec["selector"].IsNull() &&
                            !(spec["selector"].IsMap() && spec["selector"].size() == 0);
  if (has_selector) {
    const SourceMark at = mark_at(spec["selector"], sm);
    std::map<std::string, std::string> refused = {
        {"namespaces", "an agent has no namespace: select agents by labelSelectors or physicalMachines"}};
    for (const char* k : {"pods", "fieldSelectors", "annotationSelectors", "podPhaseSelectors"})
      refused[k] = kNoKubernetes;
    auto f = r.fields(spec["selector"], "spec.selector", at,
                      {"labelSelectors", "expressionSelectors", "physicalMachines"}, refused);
    if (f.contains("labelSelectors")) s.labels = string_map(r, f["labelSelectors"], "spec.selector.labelSelectors", at);
    if (f.contains("expressionSelectors"))
      s.expressions = expressions(r, f["expressionSelectors"], "spec.selector.expressionSelectors", at);
    if (f.contains("physicalMachines")) {
      const YAML::Node pm = f["physicalMachines"];
      const std::string p = "spec.selector.physicalMachines";
      if (pm.IsMap()) {  // Chaos Mesh's {namespace: [names]}
        for (auto it = pm.begin(); it != pm.end(); ++it)
          for (auto& name : string_list(r, it->second, p + "." + it->first.as<std::string>(""), at))
            s.machines.push_back(std::move(name));
      } else {
        s.machines = string_list(r, pm, p, at);
      }
    }
  }
  if (!has_selector && !spec.contains("address"))
    r.error(sm, "spec.selector",
            "missing: the agents to fault (selector.labelSelectors, selector.physicalMachines or address)");
  r.out.selector = std::move(s);
}

}  // namespace caller

// spec.mode and spec.selector: all (or none) without a selector, or one with
// labelSelectors {service: NAME}, which is the instance options.cgroup names.
void read_selection(ChaosReader& r, std::map<std::string, YAML::Node>& spec, SourceMark sm,
                    const ChaosMeshImportOptions& options) {
  if (options.selectors_by_caller) {
    caller::read_selection(r, spec, sm);
    return;
  }
  auto mode = r.scalar(spec, "mode", "spec", sm);
  if (spec.contains("value"))
    r.error(mark_at(spec["value"]), "spec.value",
            "how many pods mode picks: there are no pods on a host; leave it out");
  // An empty selector (`selector: {}`, as Chaos Mesh's examples write) selects nothing more.
  const bool has_selector = spec.contains("selector") && !spec["selector"].IsNull() &&
                            !(spec["selector"].IsMap() && spec["selector"].size() == 0);
  if (!has_selector) {
    if (mode && *mode != "all")
      r.error(mark_at(spec["mode"]), "spec.mode",
              "'" + *mode + "' picks pods: " + kSelectorShort +
                  "; leave mode out (or all), or select one instance with labelSelectors {service: NAME}");
    return;
  }
  const SourceMark at = mark_at(spec["selector"], sm);
  static const std::map<std::string, std::string> refused = {
      {"namespaces", kSelectorHelp},
      {"pods", kSelectorHelp},
      {"fieldSelectors", kSelectorHelp},
      {"annotationSelectors", kSelectorHelp},
      {"podPhaseSelectors", kSelectorHelp},
      {"expressionSelectors", kSelectorHelp},
      {"nodes", "a node is not a workload: " + kSelectorHelp},
      {"nodeSelectors", "a node is not a workload: " + kSelectorHelp}};
  auto sel = r.fields(spec["selector"], "spec.selector", at, {"labelSelectors"}, refused);
  if (mode && *mode != "one")
    r.error(mark_at(spec["mode"]), "spec.mode",
            "'" + *mode + "': with a selector, Faultline runs mode one (the instance --cgroup names)");
  else if (!mode && !spec.contains("mode"))
    r.error(sm, "spec.mode", "missing: a selector picks one instance here (mode: one)");
  if (!sel.contains("labelSelectors")) {
    if (r.out.errors.empty()) r.error(at, "spec.selector.labelSelectors", "missing: write {service: NAME}");
    return;
  }
  const size_t before = r.out.errors.size();
  std::map<std::string, std::string> other_labels;  // refused, with what to write instead
  if (sel["labelSelectors"].IsMap())
    for (auto it = sel["labelSelectors"].begin(); it != sel["labelSelectors"].end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() != "service")
        other_labels[it->first.Scalar()] =
            "Faultline selects an instance by the label service alone ({service: NAME}), whose cgroup --cgroup "
            "names";
  auto labels = r.fields(sel["labelSelectors"], "spec.selector.labelSelectors", mark_at(sel["labelSelectors"], at),
                         {"service"}, other_labels);
  auto service = r.scalar(labels, "service", "spec.selector.labelSelectors", at);
  if (!service) {
    if (!labels.contains("service") && r.out.errors.size() == before)
      r.error(mark_at(sel["labelSelectors"], at), "spec.selector.labelSelectors.service",
              "missing: the service whose instance the fault acts on");
    return;
  }
  r.out.service = *service;
  const SourceMark sv = mark_at(labels["service"], at);
  if (options.cgroup.empty()) {
    r.error(sv, "spec.selector.labelSelectors.service",
            "'" + *service +
                "' selects pods, which a host agent cannot list: give the cgroup of the instance to fault "
                "(faultctl apply --cgroup PATH)");
    return;
  }
  r.set("cgroup", options.cgroup, "spec.selector.labelSelectors.service", sv);
}

void read_duration(ChaosReader& r, std::map<std::string, YAML::Node>& spec, SourceMark sm) {
  if (auto dur = r.scalar(spec, "duration", "spec", sm)) {
    uint64_t s = 0;
    if (auto why = whole_units(*dur, 1'000'000'000ULL, "seconds", s))
      r.error(mark_at(spec["duration"]), "spec.duration", *why);
    else
      r.set("duration_sec", s, "spec.duration", mark_at(spec["duration"]));
  } else if (!spec.contains("duration")) {
    r.error(sm, "spec.duration",
            "required here: a Faultline fault always ends (at most 1h); Chaos Mesh's run-until-deleted has no "
            "equivalent without a controller");
  }
}

void read_network(ChaosReader& r, const YAML::Node& spec_node, const ChaosMeshImportOptions& options) {
  const SourceMark sm = mark_at(spec_node);
  std::set<std::string> known = {"action", "mode",  "value", "selector",  "direction", "externalTargets", "duration",
                                 "device", "delay", "loss",  "duplicate", "corrupt",   "bandwidth"};
  std::map<std::string, std::string> refused = {
      {"target",
       "a pod selector for the other side: write the peers' addresses (or names) in spec.externalTargets, or submit "
       "the file to faultcp (faultctl apply --control-plane URL), which reads target.selector"},
      {"targetDevice", "a device in the target pods: there are none on a host; use spec.device"},
      {"remoteCluster", "Faultline acts on this host only"},
      {"tcParameter", "write the fault fields (delay, loss, ...) themselves"}};
  if (options.selectors_by_caller) {
    refused.erase("target");
    known.insert("target");
  }
  auto spec = r.fields(spec_node, "spec", sm, known, refused);
  if (spec.empty() && !r.out.ok()) return;
  read_selection(r, spec, sm, options);
  if (spec.contains("target")) caller::read_target(r, spec["target"], sm);

  static const std::map<std::string, std::string> kinds = {{"delay", "latency"},       {"loss", "loss"},
                                                           {"duplicate", "duplicate"}, {"corrupt", "corrupt"},
                                                           {"partition", "partition"}, {"bandwidth", "bandwidth"}};
  auto action = r.scalar(spec, "action", "spec", sm);
  if (!action) {
    if (!spec.contains("action"))
      r.error(sm, "spec.action", "missing (delay, loss, duplicate, corrupt, partition, bandwidth)");
    return;
  }
  auto k = kinds.find(*action);
  if (k == kinds.end()) {
    r.error(mark_at(spec["action"]), "spec.action",
            "'" + *action +
                "': Faultline imports delay, loss, duplicate, corrupt, partition and bandwidth (netem: "
                "write one NetworkChaos per effect)");
    return;
  }
  r.out.action = *action;
  r.set("kind", k->second, "spec.action", mark_at(spec["action"]));
  // An effect's fields belong to its action only.
  for (const auto& [other, _] : kinds) {
    if (other != *action && other != "partition" && spec.contains(other))
      r.error(mark_at(spec[other]), "spec." + other, "a field of action " + other + ", not of " + *action);
  }

  // Targets.
  if (!spec.contains("externalTargets") && r.out.target) {
    // the peers are the target services' endpoints, which the caller resolves
  } else if (!spec.contains("externalTargets")) {
    r.error(sm, "spec.externalTargets",
            "required here: the peers (addresses, CIDRs or host names) the fault hits; a host's whole traffic is "
            "not a target");
  } else {
    const YAML::Node t = spec["externalTargets"];
    if (!t.IsSequence() || t.size() == 0) {
      r.error(mark_at(t, sm), "spec.externalTargets", "expected a list of addresses, CIDRs or host names");
    } else {
      std::vector<std::string> targets;
      for (size_t i = 0; i < t.size(); ++i) {
        const std::string p = "spec.externalTargets[" + std::to_string(i) + "]";
        if (!t[i].IsScalar() || t[i].Scalar().empty())
          r.error(mark_at(t[i], sm), p, "expected an address, CIDR or host name");
        else if (auto why = resolve_target(t[i].Scalar(), options.resolve_names, targets))
          r.error(mark_at(t[i], sm), p, *why);
      }
      if (!targets.empty()) {
        nlohmann::json v = targets.size() == 1 ? nlohmann::json(targets[0]) : nlohmann::json(targets);
        r.set("target", std::move(v), "spec.externalTargets", mark_at(t, sm));
      }
    }
  }
  if (auto d = r.scalar(spec, "direction", "spec", sm)) {
    static const std::map<std::string, std::string> dirs = {{"to", "egress"}, {"from", "ingress"}, {"both", "both"}};
    auto it = dirs.find(*d);
    if (it == dirs.end())
      r.error(mark_at(spec["direction"]), "spec.direction", "'" + *d + "': expected to, from or both");
    else
      r.set("direction", it->second, "spec.direction", mark_at(spec["direction"]));
  }
  if (auto dev = r.scalar(spec, "device", "spec", sm)) r.set("dev", *dev, "spec.device", mark_at(spec["device"]));
  read_duration(r, spec, sm);

  // The effect.
  auto effect = [&](const std::string& name, const std::set<std::string>& known) -> std::map<std::string, YAML::Node> {
    if (!spec.contains(name)) {
      r.error(sm, "spec." + name, "missing: action " + name + " needs its fields");
      return {};
    }
    return r.fields(spec[name], "spec." + name, mark_at(spec[name]), known);
  };
  auto percent = [&](const std::map<std::string, YAML::Node>& f, const std::string& field, const std::string& path,
                     const std::string& json_field) {
    auto v = r.scalar(f, field, path, sm);
    if (!v) {
      if (!f.contains(field)) r.error(mark_at(spec[path.substr(5)]), path + "." + field, "missing");
      return;
    }
    auto n = percent_number(*v);
    if (!n) {
      r.error(mark_at(f.at(field)), path + "." + field, "'" + *v + "': expected a percent, like \"25\"");
      return;
    }
    r.set(json_field, number_json(*n), path + "." + field, mark_at(f.at(field)));
  };
  // Correlation Faultline has no model for: accepted only when it cannot matter.
  auto no_correlation = [&](const std::map<std::string, YAML::Node>& f, const std::string& path,
                            const std::string& why) {
    auto c = r.scalar(f, "correlation", path, sm);
    if (c && !zero_text(*c)) r.error(mark_at(f.at("correlation")), path + ".correlation", "'" + *c + "': " + why);
  };
  auto millis = [&](const std::map<std::string, YAML::Node>& f, const std::string& field, const std::string& json_field,
                    const std::string& text) {
    uint64_t ms = 0;
    if (auto why = whole_units(text, 1'000'000ULL, "milliseconds", ms))
      r.error(mark_at(f.at(field)), "spec.delay." + field, *why);
    else
      r.set(json_field, ms, "spec.delay." + field, mark_at(f.at(field)));
  };
  if (*action == "delay") {
    auto f = effect("delay", {"latency", "jitter", "correlation", "reorder"});
    if (auto l = r.scalar(f, "latency", "spec.delay", sm))
      millis(f, "latency", "delay_ms", *l);
    else if (spec.contains("delay") && !f.contains("latency"))
      r.error(mark_at(spec["delay"]), "spec.delay.latency", "missing");
    auto j = r.scalar(f, "jitter", "spec.delay", sm);
    const bool jitter = j && j->find_first_of("123456789") != std::string::npos;  // "0ms" is none
    if (jitter) millis(f, "jitter", "jitter_ms", *j);
    if (jitter)
      no_correlation(f, "spec.delay",
                     "Faultline draws each packet's jitter independently (correlation 0); leave correlation out");
    if (f.contains("reorder"))
      r.error(mark_at(f["reorder"]), "spec.delay.reorder", "reordering is not a Faultline fault; leave it out");
  } else if (*action == "loss") {
    auto f = effect("loss", {"loss", "correlation"});
    percent(f, "loss", "spec.loss", "percent");
    if (auto c = r.scalar(f, "correlation", "spec.loss", sm); c && !zero_text(*c)) {
      if (auto n = percent_number(*c))
        r.set("correlation", number_json(*n), "spec.loss.correlation", mark_at(f["correlation"]));
      else
        r.error(mark_at(f["correlation"]), "spec.loss.correlation", "'" + *c + "': expected a percent");
    }
  } else if (*action == "duplicate" || *action == "corrupt") {
    auto f = effect(*action, {*action, "correlation"});
    percent(f, *action, "spec." + *action, "percent");
    no_correlation(f, "spec." + *action,
                   "Faultline decides each packet independently for " + *action +
                       " (correlation 0); correlated "
                       "decisions are for loss");
  } else if (*action == "bandwidth") {
    auto f = effect("bandwidth", {"rate", "limit", "buffer", "peakrate", "minburst"});
    if (auto rate = r.scalar(f, "rate", "spec.bandwidth", sm)) {
      auto bps = parse_rate_bps(*rate);
      if (!bps)
        r.error(mark_at(f["rate"]), "spec.bandwidth.rate", "'" + *rate + "': " + bps.error().message);
      else
        r.set("rate_bps", *bps, "spec.bandwidth.rate", mark_at(f["rate"]));
    } else if (spec.contains("bandwidth") && !f.contains("rate")) {
      r.error(mark_at(spec["bandwidth"]), "spec.bandwidth.rate", "missing");
    }
    for (const char* tbf : {"limit", "buffer"}) {
      if (f.contains(tbf))
        r.out.notes.push_back(std::string("spec.bandwidth.") + tbf +
                              " (a tc tbf queue size) has no equivalent in Faultline's pacing and is not used");
    }
    for (const char* tbf : {"peakrate", "minburst"}) {
      if (f.contains(tbf))
        r.error(mark_at(f[tbf]), std::string("spec.bandwidth.") + tbf,
                "a second tbf bucket Faultline does not model: leave it out (rate alone is the cap)");
    }
  }
}

// PodChaos pod-kill with gracePeriod 0: Faultline's process kill (SIGKILL)
// of the selected instance; its duration is how long the run watches after.
void read_pod(ChaosReader& r, const YAML::Node& spec_node, const ChaosMeshImportOptions& options) {
  const SourceMark sm = mark_at(spec_node);
  auto spec = r.fields(spec_node, "spec", sm, {"action", "mode", "value", "selector", "gracePeriod", "duration"},
                       {{"containerNames", "containers are a pod's: there are none on a host; leave it out"},
                        {"remoteCluster", "Faultline acts on this host only"}});
  if (spec.empty() && !r.out.ok()) return;
  read_selection(r, spec, sm, options);
  read_duration(r, spec, sm);
  auto action = r.scalar(spec, "action", "spec", sm);
  if (!action) {
    if (!spec.contains("action")) r.error(sm, "spec.action", "missing (pod-kill)");
    return;
  }
  if (*action != "pod-kill") {
    r.error(mark_at(spec["action"]), "spec.action",
            "'" + *action + "': Faultline imports pod-kill (as a process kill); use faultctl run process for others");
    return;
  }
  r.out.action = *action;
  auto grace = r.scalar(spec, "gracePeriod", "spec", sm);
  if (!grace || *grace != "0") {
    if (grace || !spec.contains("gracePeriod"))
      r.error(grace ? mark_at(spec["gracePeriod"]) : sm, "spec.gracePeriod",
              (grace ? "'" + *grace + "': " : std::string("missing: ")) +
                  "a grace period (SIGTERM, SIGKILL after it) is not a Faultline fault: write gracePeriod: 0 "
                  "(SIGKILL), or run faultctl run process --signal SIGTERM");
    return;
  }
  const SourceMark am = mark_at(spec["action"]);
  r.set("kind", "process", "spec.action", am);
  r.set("action", "kill", "spec.action", am);
  r.set("signal", "SIGKILL", "spec.gracePeriod", mark_at(spec["gracePeriod"]));
}

// StressChaos: its cpu stressor is Faultline's cpu fault (workers -> cores).
void read_stress(ChaosReader& r, const YAML::Node& spec_node, const ChaosMeshImportOptions& options) {
  const SourceMark sm = mark_at(spec_node);
  auto spec = r.fields(spec_node, "spec", sm, {"mode", "value", "selector", "stressors", "duration"},
                       {{"containerNames", "containers are a pod's: there are none on a host; leave it out"},
                        {"stressngStressors", "stress-ng options are not Faultline faults: write stressors.cpu"},
                        {"remoteCluster", "Faultline acts on this host only"}});
  if (spec.empty() && !r.out.ok()) return;
  read_selection(r, spec, sm, options);
  read_duration(r, spec, sm);
  if (!spec.contains("stressors")) {
    r.error(sm, "spec.stressors", "missing: write stressors.cpu {workers, load}");
    return;
  }
  auto st = r.fields(spec["stressors"], "spec.stressors", mark_at(spec["stressors"], sm), {"cpu"},
                     {{"memory", "a memory stressor: Faultline's memory fault takes a size (faultctl run memory)"}});
  if (!st.contains("cpu")) {
    if (r.out.errors.empty()) r.error(mark_at(spec["stressors"], sm), "spec.stressors.cpu", "missing");
    return;
  }
  r.out.action = "stress-cpu";
  const SourceMark cm = mark_at(st["cpu"], sm);
  r.set("kind", "cpu", "spec.stressors.cpu", cm);
  auto cpu = r.fields(st["cpu"], "spec.stressors.cpu", cm, {"workers", "load"},
                      {{"options", "stress-ng options are not Faultline faults: leave them out"}});
  auto number = [&](const char* field, const char* json_field) {
    auto v = r.scalar(cpu, field, "spec.stressors.cpu", cm);
    if (!v) {
      if (!cpu.contains(field)) r.error(cm, std::string("spec.stressors.cpu.") + field, "missing");
      return;
    }
    auto n = percent_number(*v);
    if (!n || *n != static_cast<double>(static_cast<int64_t>(*n)))
      r.error(mark_at(cpu.at(field)), std::string("spec.stressors.cpu.") + field,
              "'" + *v + "': expected a whole number");
    else
      r.set(json_field, static_cast<int64_t>(*n), std::string("spec.stressors.cpu.") + field, mark_at(cpu.at(field)));
  };
  number("workers", "cores");
  number("load", "load");
}

// PhysicalMachineChaos: chaosd's attacks on a machine, each action with a
// block of its own named after it (spec.network-delay, spec.stress-cpu, ...).
// The machine is the one faultctl apply runs on: the selection fields pick
// machines among chaosd's, which is the caller's choice here, said in a note.
namespace physical {

// dd's size units, as chaosd's disk actions take them: c=1, w=2, b=512,
// kB=1000, K=1024, MB=1000^2, M=1024^2, GB=1000^3, G=1024^3.
std::optional<uint64_t> dd_bytes(const std::string& text) {
  static const std::vector<std::pair<std::string, uint64_t>> units = {{"kB", 1000ULL},
                                                                      {"MB", 1000'000ULL},
                                                                      {"GB", 1000'000'000ULL},
                                                                      {"K", 1ULL << 10},
                                                                      {"M", 1ULL << 20},
                                                                      {"G", 1ULL << 30},
                                                                      {"c", 1},
                                                                      {"w", 2},
                                                                      {"b", 512},
                                                                      {"", 1}};
  const size_t digits = text.find_first_not_of("0123456789");
  if (digits == 0 || text.empty() || digits > 15) return std::nullopt;
  const std::string unit = digits == std::string::npos ? "" : text.substr(digits);
  for (const auto& [u, mult] : units)
    if (unit == u) return std::stoull(text.substr(0, digits)) * mult;
  return std::nullopt;
}

// A regular expression matching `name` literally (Faultline's process name is one).
std::string literal_regex(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

const std::map<std::string, std::string> kPacketKinds = {
    {"network-delay", "latency"},       {"network-loss", "loss"},           {"network-corrupt", "corrupt"},
    {"network-duplicate", "duplicate"}, {"network-partition", "partition"}, {"network-bandwidth", "bandwidth"}};

// Actions a host agent will not take, each with the reason.
const std::map<std::string, std::string> kRefusedActions = {
    {"network-dns",
     "Faultline fails a name's queries (faultctl run dns) but rewrites no resolv.conf and maps no names to "
     "addresses"},
    {"disk-read-payload", "disk I/O load is not a Faultline fault (faultctl run syscall fails or slows reads)"},
    {"disk-write-payload", "disk I/O load is not a Faultline fault (faultctl run syscall fails or slows writes)"},
    {"clock", "shifting a process's clock is not a Faultline fault"},
};

void read_network(ChaosReader& r, const std::string& action, const YAML::Node& block, SourceMark bm,
                  const ChaosMeshImportOptions& options) {
  const std::string path = "spec." + action;
  std::set<std::string> known = {"device", "ip-address", "hostname", "ip-protocol", "egress-port", "correlation"};
  if (action == "network-delay") known.insert({"latency", "jitter"});
  if (action == "network-loss" || action == "network-corrupt" || action == "network-duplicate") known.insert("percent");
  if (action == "network-partition") {
    known.erase("correlation");
    known.erase("egress-port");
    known.insert("direction");
  }
  if (action == "network-bandwidth")
    known = {"rate", "limit", "buffer", "peakrate", "minburst", "device", "ip-address", "hostname"};
  std::map<std::string, std::string> refused = {
      {"source-port", "Faultline matches the remote port (egress-port), not this host's own"},
      {"accept-tcp-flags", "a partition letting some TCP flags through is not a Faultline fault; leave it out"}};
  auto f = r.fields(block, path, bm, known, refused);
  r.set("kind", kPacketKinds.at(action), "spec.action", bm);

  // The peers: ip-address and hostname, each a comma-separated list.
  std::vector<std::string> targets;
  for (const char* field : {"ip-address", "hostname"}) {
    auto v = r.scalar(f, field, path, bm);
    if (!v) continue;
    size_t start = 0;
    while (start <= v->size()) {
      const size_t comma = std::min(v->find(',', start), v->size());
      const std::string one = v->substr(start, comma - start);
      if (one.empty())
        r.error(mark_at(f.at(field), bm), path + "." + field, "'" + *v + "': an empty entry");
      else if (auto why = resolve_target(one, options.resolve_names, targets))
        r.error(mark_at(f.at(field), bm), path + "." + field, *why);
      start = comma + 1;
    }
  }
  if (!f.contains("ip-address") && !f.contains("hostname")) {
    r.error(bm, path + ".ip-address",
            "required here: the peers (addresses, CIDRs or host names, in ip-address or hostname) the fault "
            "hits; a whole device's traffic is not a target (faultctl run --force does that)");
  } else if (!targets.empty()) {
    nlohmann::json v = targets.size() == 1 ? nlohmann::json(targets[0]) : nlohmann::json(targets);
    r.set("target", std::move(v), path + "." + (f.contains("ip-address") ? "ip-address" : "hostname"),
          mark_at(f.contains("ip-address") ? f.at("ip-address") : f.at("hostname"), bm));
  }
  if (auto dev = r.scalar(f, "device", path, bm)) r.set("dev", *dev, path + ".device", mark_at(f.at("device"), bm));
  if (auto p = r.scalar(f, "ip-protocol", path, bm)) {
    if (*p == "tcp" || *p == "udp" || *p == "icmp")
      r.set("proto", *p, path + ".ip-protocol", mark_at(f.at("ip-protocol"), bm));
    else if (*p != "all")
      r.error(mark_at(f.at("ip-protocol"), bm), path + ".ip-protocol", "'" + *p + "': expected tcp, udp, icmp or all");
  }
  if (auto port = r.scalar(f, "egress-port", path, bm)) {
    std::string range = *port;
    std::replace(range.begin(), range.end(), ':', '-');  // chaosd writes a range 8001:8010
    if (range.find(',') != std::string::npos)
      r.error(mark_at(f.at("egress-port"), bm), path + ".egress-port",
              "'" + *port + "': Faultline takes one port or one range (A:B) per fault");
    else
      r.set("port", range, path + ".egress-port", mark_at(f.at("egress-port"), bm));
  }
  auto correlation = r.scalar(f, "correlation", path, bm);
  const bool correlated = correlation && !zero_text(*correlation);

  if (action == "network-delay") {
    auto whole_ms = [&](const char* field, const char* json_field) {
      auto v = r.scalar(f, field, path, bm);
      if (!v) return false;
      uint64_t ms = 0;
      if (auto why = whole_units(*v, 1'000'000ULL, "milliseconds", ms))
        r.error(mark_at(f.at(field), bm), path + "." + field, *why);
      else if (ms > 0)
        r.set(json_field, ms, path + "." + field, mark_at(f.at(field), bm));
      return true;
    };
    if (!whole_ms("latency", "delay_ms") && !f.contains("latency")) r.error(bm, path + ".latency", "missing");
    whole_ms("jitter", "jitter_ms");
    if (correlated)
      r.error(mark_at(f.at("correlation"), bm), path + ".correlation",
              "'" + *correlation + "': Faultline draws each packet's delay independently (correlation 0)");
  } else if (action == "network-loss" || action == "network-corrupt" || action == "network-duplicate") {
    if (auto v = r.scalar(f, "percent", path, bm)) {
      if (auto n = percent_number(*v))
        r.set("percent", number_json(*n), path + ".percent", mark_at(f.at("percent"), bm));
      else
        r.error(mark_at(f.at("percent"), bm), path + ".percent", "'" + *v + "': expected a percent, like \"25\"");
    } else if (!f.contains("percent")) {
      r.error(bm, path + ".percent", "missing");
    }
    if (correlated && action == "network-loss") {
      if (auto n = percent_number(*correlation))
        r.set("correlation", number_json(*n), path + ".correlation", mark_at(f.at("correlation"), bm));
      else
        r.error(mark_at(f.at("correlation"), bm), path + ".correlation", "'" + *correlation + "': expected a percent");
    } else if (correlated) {
      r.error(mark_at(f.at("correlation"), bm), path + ".correlation",
              "'" + *correlation +
                  "': Faultline decides each packet independently here (correlation 0); correlated decisions are "
                  "for loss");
    }
  } else if (action == "network-partition") {
    if (auto d = r.scalar(f, "direction", path, bm)) {
      static const std::map<std::string, std::string> dirs = {{"to", "egress"}, {"from", "ingress"}, {"both", "both"}};
      auto it = dirs.find(*d);
      if (it == dirs.end())
        r.error(mark_at(f.at("direction"), bm), path + ".direction", "'" + *d + "': expected to, from or both");
      else
        r.set("direction", it->second, path + ".direction", mark_at(f.at("direction"), bm));
    }
  } else if (action == "network-bandwidth") {
    if (auto rate = r.scalar(f, "rate", path, bm)) {
      auto bps = parse_rate_bps(*rate);
      if (!bps)
        r.error(mark_at(f.at("rate"), bm), path + ".rate", "'" + *rate + "': " + bps.error().message);
      else
        r.set("rate_bps", *bps, path + ".rate", mark_at(f.at("rate"), bm));
    } else if (!f.contains("rate")) {
      r.error(bm, path + ".rate", "missing");
    }
    for (const char* tbf : {"limit", "buffer"})
      if (f.contains(tbf))
        r.out.notes.push_back(path + "." + tbf +
                              " (a tc tbf queue size) has no equivalent in Faultline's pacing and "
                              "is not used");
    for (const char* tbf : {"peakrate", "minburst"})
      if (f.contains(tbf))
        r.error(mark_at(f.at(tbf), bm), path + "." + tbf,
                "a second tbf bucket Faultline does not model: leave it out (rate alone is the cap)");
  }
}

void read_process(ChaosReader& r, const YAML::Node& block, SourceMark bm) {
  auto f = r.fields(block, "spec.process", bm, {"process", "signal"},
                    {{"recoverCmd", "Faultline runs no commands: a frozen process resumes at the end by itself"}});
  r.set("kind", "process", "spec.action", bm);
  if (auto p = r.scalar(f, "process", "spec.process", bm)) {
    const SourceMark pm = mark_at(f.at("process"), bm);
    if (p->find_first_not_of("0123456789") == std::string::npos && p->size() <= 9)
      r.set("pid", std::stoll(*p), "spec.process.process", pm);
    else
      r.set("name", literal_regex(*p), "spec.process.process", pm);
  } else if (!f.contains("process")) {
    r.error(bm, "spec.process.process", "missing: the process name or ID");
  }
  auto sig = r.scalar(f, "signal", "spec.process", bm);
  if (!sig) {
    if (!f.contains("signal")) r.error(bm, "spec.process.signal", "missing: the signal number (9, or 19 to stop)");
    return;
  }
  const SourceMark sm = mark_at(f.at("signal"), bm);
  if (*sig == std::to_string(SIGSTOP)) {
    r.set("action", "freeze", "spec.process.signal", sm);  // SIGCONT at the end
    return;
  }
  r.set("action", "kill", "spec.process.signal", sm);
  r.set("signal", *sig, "spec.process.signal", sm);
}

void read_stress(ChaosReader& r, const std::string& action, const YAML::Node& block, SourceMark bm) {
  const std::string path = "spec." + action;
  std::map<std::string, std::string> refused = {
      {"options", "stress-ng options are not Faultline faults: leave them out"}};
  if (action == "stress-cpu") {
    auto f = r.fields(block, path, bm, {"load", "workers"}, refused);
    r.set("kind", "cpu", "spec.action", bm);
    for (const auto& [field, json_field] : {std::pair{"workers", "cores"}, std::pair{"load", "load"}}) {
      auto v = r.scalar(f, field, path, bm);
      if (!v) {
        if (!f.contains(field)) r.error(bm, path + "." + field, "missing");
        continue;
      }
      auto n = percent_number(*v);
      if (!n || *n != static_cast<double>(static_cast<int64_t>(*n)))
        r.error(mark_at(f.at(field), bm), path + "." + field, "'" + *v + "': expected a whole number");
      else
        r.set(json_field, static_cast<int64_t>(*n), path + "." + field, mark_at(f.at(field), bm));
    }
    return;
  }
  auto f = r.fields(block, path, bm, {"size"}, refused);
  r.set("kind", "memory", "spec.action", bm);
  auto size = r.scalar(f, "size", path, bm);
  if (!size) {
    if (!f.contains("size")) r.error(bm, path + ".size", "missing: how much memory to hold, like 512MB");
    return;
  }
  if (size->find('%') != std::string::npos) {
    r.error(mark_at(f.at("size"), bm), path + ".size",
            "'" + *size +
                "': a share of memory; write a size, like 512MB (Faultline keeps some memory free "
                "whatever the size)");
    return;
  }
  r.set("size", *size, path + ".size", mark_at(f.at("size"), bm));
}

void read_disk_fill(ChaosReader& r, const YAML::Node& block, SourceMark bm) {
  const std::string path = "spec.disk-fill";
  auto f = r.fields(block, path, bm, {"size", "path", "fill-by-fallocate"});
  r.set("kind", "disk", "spec.action", bm);
  if (auto size = r.scalar(f, "size", path, bm)) {
    if (auto bytes = physical::dd_bytes(*size))
      r.set("size", std::to_string(*bytes), path + ".size", mark_at(f.at("size"), bm));
    else
      r.error(mark_at(f.at("size"), bm), path + ".size",
              "'" + *size + "': expected a number with a dd unit (c, w, b, kB, K, MB, M, GB, G)");
  } else if (!f.contains("size")) {
    r.error(bm, path + ".size", "missing: how much to fill, like 1G");
  }
  if (auto p = r.scalar(f, "path", path, bm)) {
    // chaosd writes one file; Faultline's balloon goes in a directory: the
    // file's own, or the path itself when it is one.
    std::string dir = *p;
    struct stat st {};
    if (!(::stat(p->c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
      const size_t slash = p->find_last_of('/');
      dir = slash == std::string::npos ? "." : slash == 0 ? "/" : p->substr(0, slash);
      r.out.notes.push_back(path + ".path: the fill goes in " + dir + " (Faultline writes its own file there)");
    }
    r.set("path", dir, path + ".path", mark_at(f.at("path"), bm));
  } else if (!f.contains("path")) {
    r.error(bm, path + ".path", "missing: where to fill (a file or a directory)");
  }
  if (f.contains("fill-by-fallocate"))
    r.out.notes.push_back(path + ".fill-by-fallocate: Faultline chooses how it writes its fill; not used");
}

// The actions imported, each with a block of fields named after it.
const std::vector<std::string> kActions = {
    "network-delay",     "network-loss", "network-corrupt", "network-duplicate", "network-partition",
    "network-bandwidth", "stress-cpu",   "stress-mem",      "process",           "disk-fill"};

// Why an action is not imported (none: it is one of kActions).
std::optional<std::string> refusal(const std::string& action) {
  if (auto why = kRefusedActions.find(action); why != kRefusedActions.end()) return why->second;
  if (action.rfind("http-", 0) == 0)
    return "chaosd faults the requests this host receives; Faultline's HTTP faults act client-side (faultctl run "
           "http, or the guard)";
  if (std::find(kActions.begin(), kActions.end(), action) == kActions.end())
    return "no such Faultline fault (it imports network-delay, -loss, -corrupt, -duplicate, -partition, "
           "-bandwidth, stress-cpu, stress-mem, process and disk-fill)";
  return std::nullopt;
}

// One action's block (an action of kActions) into r.out.spec.
void read_action(ChaosReader& r, const std::string& action, const YAML::Node& block, SourceMark bm,
                 const ChaosMeshImportOptions& options) {
  if (kPacketKinds.contains(action))
    read_network(r, action, block, bm, options);
  else if (action == "process")
    read_process(r, block, bm);
  else if (action == "disk-fill")
    read_disk_fill(r, block, bm);
  else
    read_stress(r, action, block, bm);
}

}  // namespace physical

void read_physical_machine(ChaosReader& r, const YAML::Node& spec_node, const ChaosMeshImportOptions& options) {
  const SourceMark sm = mark_at(spec_node);
  std::set<std::string> known = {"action", "address", "mode", "value", "selector", "duration", "uid"};
  known.insert(physical::kActions.begin(), physical::kActions.end());
  std::map<std::string, std::string> refused;
  for (const auto& [a, why] : physical::kRefusedActions) refused[a] = why;
  refused["remoteCluster"] = "Faultline acts on this host only";
  auto spec = r.fields(spec_node, "spec", sm, known, refused);
  if (spec.empty() && !r.out.ok()) return;
  read_duration(r, spec, sm);
  // The machines: the agents the caller picks, or this one.
  if (options.selectors_by_caller) {
    caller::read_machines(r, spec, sm);
  } else {
    for (const char* sel : {"address", "selector", "mode", "value"})
      if (spec.contains(sel))
        r.out.notes.push_back(std::string("spec.") + sel +
                              " picks machines; faultctl apply acts on the one it runs on");
  }

  auto action = r.scalar(spec, "action", "spec", sm);
  if (!action) {
    if (!spec.contains("action")) r.error(sm, "spec.action", "missing");
    return;
  }
  const SourceMark am = mark_at(spec["action"]);
  if (auto why = physical::refusal(*action)) {
    r.error(am, "spec.action", "'" + *action + "': " + *why);
    return;
  }
  r.out.action = *action;
  for (const auto& b : physical::kActions)
    if (b != *action && spec.contains(b))
      r.error(mark_at(spec[b]), "spec." + b, "the fields of action " + b + ", not of " + *action);
  if (!spec.contains(*action)) {
    r.error(sm, "spec." + *action, "missing: action " + *action + " needs its fields");
    return;
  }
  physical::read_action(r, *action, spec[*action], mark_at(spec[*action], sm), options);
}

// The typed experiment of what a reader set in r.out.spec: the family reader
// judges the values (caps, units); its refusal is put at the field the
// experiment's field came from (spec_at: where anything else goes). Errors
// sorted by place. check false: the caller completes the spec (faultcp's
// target peers) and checks it whole.
void finish(ChaosReader& r, SourceMark spec_at, bool check = true) {
  if (r.out.ok() && check) {
    auto e = experiment_from_json(r.out.spec, "");
    if (e) {
      r.out.experiment = std::move(*e);
    } else {
      std::string field = spec_error_field(e.error());
      if (field.rfind("spec.", 0) == 0) field = field.substr(5);
      if (auto b = field.find('['); b != std::string::npos) field.resize(b);
      auto w = r.where.find(field);
      if (w != r.where.end())
        r.error(w->second.mark, w->second.path, e.error().message);
      else
        r.error(spec_at, "spec", e.error().message);
    }
  }
  std::sort(r.out.errors.begin(), r.out.errors.end(), [](const PolicyDiagnostic& a, const PolicyDiagnostic& b) {
    return std::tie(a.mark.line, a.mark.column) < std::tie(b.mark.line, b.mark.column);
  });
}

// chaosd's attack JSON (the body its HTTP API takes at /api/attack/KIND),
// written as {"KIND": BODY}: KIND and BODY.action name the PhysicalMachineChaos
// action it is, read by that action's reader (physical::read_action).
namespace chaosd {

// The PhysicalMachineChaos action of chaosd's attack KIND with BODY.action.
std::string machine_action(const std::string& kind, const std::string& action) {
  if (kind == "network" || kind == "disk" || kind == "http") return kind + "-" + action;
  if (kind == "stress") return "stress-" + action;
  if (kind == "process" && (action == "kill" || action == "stop")) return "process";
  return kind + " " + action;  // no such action: physical::refusal() says so
}

// A path of the PhysicalMachineChaos readers ("spec.network-delay.latency",
// "spec.duration") as the field of the attack JSON ("network.latency",
// "network.duration").
std::string rebase(const std::string& path, const std::string& kind, const std::string& action) {
  const std::string block = "spec." + action;
  if (path.rfind(block, 0) == 0 &&
      (path.size() == block.size() || path[block.size()] == '.' || path[block.size()] == ':'))
    return kind + path.substr(block.size());
  if (path.rfind("spec.", 0) == 0) return kind + "." + path.substr(5);
  if (path == "spec") return kind;
  return path;
}

// process: chaosd's kill sends its signal (9 when none is given); stop sends SIGSTOP.
bool read_process_signal(ChaosReader& r, const std::string& action, YAML::Node& block, SourceMark bm) {
  if (!block.IsMap()) return true;
  const YAML::Node sig = std::as_const(block)["signal"];
  if (action == "kill") {
    if (!sig) block["signal"] = std::to_string(SIGKILL);
    return true;
  }
  if (sig && !(sig.IsScalar() && sig.Scalar() == std::to_string(SIGSTOP))) {
    r.error(mark_at(sig, bm), "process.signal", "action stop sends SIGSTOP (19): leave signal out");
    return false;
  }
  block["signal"] = std::to_string(SIGSTOP);
  return true;
}

void read_attack(ChaosReader& r, const YAML::Node& doc, const ChaosMeshImportOptions& options) {
  const SourceMark root{1, 1};
  if (!doc.IsMap() || doc.size() != 1 || !doc.begin()->first.IsScalar()) {
    r.error(mark_at(doc, root), "<document>",
            "expected one attack: {\"network\" | \"stress\" | \"process\" | \"disk\": the body chaosd's "
            "/api/attack/KIND takes}");
    return;
  }
  const std::string kind = doc.begin()->first.Scalar();
  const YAML::Node body_node = doc.begin()->second;
  const SourceMark bm = mark_at(body_node, root);
  if (!body_node.IsMap()) {
    r.error(bm, kind, "expected the attack's fields (an object)");
    return;
  }
  const YAML::Node action_node = body_node["action"];
  if (!action_node || !action_node.IsScalar() || action_node.Scalar().empty()) {
    r.error(action_node ? mark_at(action_node, bm) : bm, kind + ".action",
            action_node ? "expected the action's name" : "missing: the attack's action");
    return;
  }
  const std::string machine = machine_action(kind, action_node.Scalar());
  const SourceMark am = mark_at(action_node, bm);
  if (auto why = physical::refusal(machine)) {
    const std::string said = machine.find(' ') == std::string::npos ? machine : kind + " " + action_node.Scalar();
    r.error(am, kind + ".action", "'" + said + "': " + *why);
    return;
  }
  r.out.action = machine;
  r.out.name = body_node["uid"] && body_node["uid"].IsScalar() ? body_node["uid"].Scalar() : "chaosd-" + machine;
  // The body is the action's block, less the fields of every attack.
  std::map<std::string, YAML::Node> common;
  for (const char* k : {"action", "duration", "uid", "kind"}) {
    r.shared.insert(k);
    if (body_node[k]) common[k] = body_node[k];
  }
  YAML::Node block = body_node;
  if (kind == "process" && !read_process_signal(r, action_node.Scalar(), block, bm)) return;
  read_duration(r, common, bm);
  physical::read_action(r, machine, block, bm, options);
  for (auto& e : r.out.errors) e.path = rebase(e.path, kind, machine);
  for (auto& [field, at] : r.where) at.path = rebase(at.path, kind, machine);
  for (auto& n : r.out.notes) n = rebase(n, kind, machine);
}

// Where the JSON parser stopped (a byte offset) as a line and column.
SourceMark mark_of_offset(std::string_view text, size_t offset) {
  SourceMark m{1, 1};
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++m.line;
      m.column = 1;
    } else {
      ++m.column;
    }
  }
  return m;
}

}  // namespace chaosd

}  // namespace

bool ChaosMeshSelector::matches_labels(const std::map<std::string, std::string>& have) const {
  for (const auto& [k, v] : labels)
    if (auto it = have.find(k); it == have.end() || it->second != v) return false;
  for (const auto& e : expressions) {
    auto it = have.find(e.key);
    const bool listed = it != have.end() && std::find(e.values.begin(), e.values.end(), it->second) != e.values.end();
    if ((e.op == "In" && !listed) || (e.op == "NotIn" && listed) || (e.op == "Exists" && it == have.end()) ||
        (e.op == "DoesNotExist" && it != have.end()))
      return false;
  }
  return true;
}

nlohmann::json ChaosMeshSelector::to_json() const {
  nlohmann::json j = {{"mode", mode}};
  if (value > 0) j["value"] = value;
  if (!namespaces.empty()) j["namespaces"] = namespaces;
  if (!labels.empty()) j["labelSelectors"] = labels;
  if (!expressions.empty()) {
    j["expressionSelectors"] = nlohmann::json::array();
    for (const auto& e : expressions)
      j["expressionSelectors"].push_back({{"key", e.key}, {"operator", e.op}, {"values", e.values}});
  }
  if (!nodes.empty()) j["nodes"] = nodes;
  if (!node_labels.empty()) j["nodeSelectors"] = node_labels;
  if (!machines.empty()) j["physicalMachines"] = machines;
  if (!addresses.empty()) j["address"] = addresses;
  return j;
}

bool looks_like_chaos_mesh(std::string_view text) {
  return text.find(std::string(kChaosMeshApiVersion)) != std::string_view::npos;
}

ChaosMeshImport import_chaos_mesh(std::string_view text, const ChaosMeshImportOptions& options) {
  ChaosReader r;
  r.out.spec = nlohmann::json::object();
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    r.error({e.mark.line + 1, e.mark.column + 1}, "<document>", "not YAML: " + e.msg);
    return r.out;
  }
  if (docs.size() != 1) {
    r.error({1, 1}, "<document>",
            docs.empty() ? "empty"
                         : "one Chaos Mesh document per file (found " + std::to_string(docs.size()) + " documents)");
    return r.out;
  }
  const YAML::Node& doc = docs[0];
  auto top = r.fields(doc, "", {1, 1}, {"apiVersion", "kind", "metadata", "spec"});
  if (!r.out.ok()) return r.out;
  const SourceMark root{1, 1};
  auto api = r.scalar(top, "apiVersion", "", root);
  if (!api || *api != kChaosMeshApiVersion)
    r.error(top.contains("apiVersion") ? mark_at(top["apiVersion"]) : root, "apiVersion",
            "expected " + std::string(kChaosMeshApiVersion));
  auto kind = r.scalar(top, "kind", "", root);
  if (!kind ||
      (*kind != "NetworkChaos" && *kind != "StressChaos" && *kind != "PodChaos" && *kind != "PhysicalMachineChaos"))
    r.error(top.contains("kind") ? mark_at(top["kind"]) : root, "kind",
            "expected NetworkChaos, StressChaos, PodChaos or PhysicalMachineChaos (other Chaos Mesh kinds: use "
            "faultctl run syscall|memory|disk)");
  if (!r.out.ok()) return r.out;  // not a kind read here: its spec means something else
  r.out.kind = *kind;
  if (top.contains("metadata")) {
    auto md =
        r.fields(top["metadata"], "metadata", mark_at(top["metadata"]), {"name", "namespace", "labels", "annotations"});
    if (auto n = r.scalar(md, "name", "metadata", mark_at(top["metadata"]))) r.out.name = *n;
  }
  if (!top.contains("spec")) {
    r.error(root, "spec", "missing");
    return r.out;
  }
  if (*kind == "NetworkChaos")
    read_network(r, top["spec"], options);
  else if (*kind == "StressChaos")
    read_stress(r, top["spec"], options);
  else if (*kind == "PhysicalMachineChaos")
    read_physical_machine(r, top["spec"], options);
  else
    read_pod(r, top["spec"], options);
  if (r.out.name.empty()) r.error(root, "metadata.name", "missing");
  const bool peers_pending = r.out.target && !r.out.spec.contains("target");
  finish(r, mark_at(top["spec"]), !peers_pending);
  return r.out;
}

bool looks_like_chaosd_attack(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') return false;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return text.find("apiVersion") == std::string_view::npos;  // broken JSON: its reader says where
  return !j.contains("apiVersion");
}

ChaosMeshImport import_chaosd_attack(std::string_view text, const ChaosMeshImportOptions& options) {
  ChaosReader r;
  r.out.spec = nlohmann::json::object();
  r.out.kind = "chaosd attack";
  // Strict JSON first: the YAML reader then reads only what JSON allows.
  try {
    (void)nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    r.error(chaosd::mark_of_offset(text, e.byte > 0 ? e.byte - 1 : 0), "<document>",
            std::string("not JSON: ") + (std::strchr(e.what(), ':') ? std::strchr(e.what(), ':') + 2 : e.what()));
    return r.out;
  }
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    r.error({e.mark.line + 1, e.mark.column + 1}, "<document>", "not read: " + e.msg);
    return r.out;
  }
  chaosd::read_attack(r, doc, options);
  finish(r, mark_at(doc));
  return r.out;
}

}  // namespace faultline
