// NetworkChaos -> faultctl run words. The mapping, field by field:
//   action delay|loss|duplicate|corrupt|partition|bandwidth -> latency|loss|duplicate|corrupt|partition|bandwidth
//   externalTargets (addresses, CIDRs, host names)          -> --target (each)
//   direction to|from|both                                  -> --direction egress|ingress|both
//   duration                                                -> --duration (required here)
//   device                                                  -> --dev
//   delay.latency, delay.jitter                             -> --delay, --jitter
//   loss.loss, loss.correlation                             -> --percent, --correlation
//   duplicate.duplicate, corrupt.corrupt                    -> --percent
//   bandwidth.rate                                          -> --rate (tc units: mbps is bytes/s, as ours)
#include "userspace/policy/chaos_mesh.h"

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>

namespace faultline {
namespace {

SourceMark mark_at(const YAML::Node& n, SourceMark fallback = {1, 1}) {
  const YAML::Mark m = n.Mark();
  if (m.line < 0 || m.column < 0) return fallback;
  return {m.line + 1, m.column + 1};
}

class ChaosReader {
 public:
  ChaosMeshRead out;

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
      if (auto r = refused.find(k); r != refused.end()) {
        if (!(it->second.IsNull() || ((it->second.IsMap() || it->second.IsSequence()) && it->second.size() == 0)))
          error(mark_at(it->first, at), p, r->second);
        continue;
      }
      if (!known.contains(k)) {
        error(mark_at(it->first, at), p, "not a field Faultline reads from a NetworkChaos");
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

  void flag(const std::string& flag, const std::string& value, const std::string& path, SourceMark m) {
    out.fault.words.push_back(flag);
    out.fault.words.push_back(value);
    out.fault.flag_fields.push_back({flag, PolicyDiagnostic{m, path, ""}});
  }
};

const std::string kSelectorHelp =
    "pod selectors cannot be honoured by a host agent: Faultline acts on this host's own traffic. Remove it, name "
    "the peers in spec.externalTargets, and to narrow the fault to one workload run it with faultctl run --cgroup "
    "PATH";

// Percent text as Chaos Mesh writes it ("25", "25.5") -> the same text, checked.
bool percent_text(const std::string& v) {
  return !v.empty() && v.find_first_not_of("0123456789.") == std::string::npos && v.front() != '.';
}

bool zero_text(const std::string& v) { return v.find_first_not_of("0.") == std::string::npos; }

}  // namespace

bool looks_like_chaos_mesh(std::string_view text) {
  return text.find(std::string(kChaosMeshApiVersion)) != std::string_view::npos;
}

ChaosMeshRead read_network_chaos(std::string_view text) {
  ChaosReader r;
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    r.error({e.mark.line + 1, e.mark.column + 1}, "<document>", "not YAML: " + e.msg);
    return r.out;
  }
  if (docs.size() != 1) {
    r.error({1, 1}, "<document>",
            docs.empty() ? "empty" : "one NetworkChaos per file (found " + std::to_string(docs.size()) + " documents)");
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
  if (!kind || *kind != "NetworkChaos")
    r.error(top.contains("kind") ? mark_at(top["kind"]) : root, "kind",
            "expected NetworkChaos (other Chaos Mesh kinds: use faultctl run syscall|process|cpu|memory|disk)");
  if (!r.out.ok()) return r.out;  // not a NetworkChaos: its spec means something else
  if (top.contains("metadata")) {
    auto md =
        r.fields(top["metadata"], "metadata", mark_at(top["metadata"]), {"name", "namespace", "labels", "annotations"});
    if (auto n = r.scalar(md, "name", "metadata", mark_at(top["metadata"]))) r.out.fault.name = *n;
  }
  if (!top.contains("spec")) {
    r.error(root, "spec", "missing");
    return r.out;
  }
  const YAML::Node spec_node = top["spec"];
  const SourceMark sm = mark_at(spec_node);
  auto spec = r.fields(spec_node, "spec", sm,
                       {"action", "mode", "value", "direction", "externalTargets", "duration", "device", "delay",
                        "loss", "duplicate", "corrupt", "bandwidth"},
                       {{"selector", kSelectorHelp},
                        {"target",
                         "a pod selector for the other side: write the peers' addresses (or names) in "
                         "spec.externalTargets"},
                        {"targetDevice", "a device in the target pods: there are none on a host; use spec.device"},
                        {"remoteCluster", "Faultline acts on this host only"},
                        {"tcParameter", "write the fault fields (delay, loss, ...) themselves"}});
  if (spec.empty() && !r.out.ok()) return r.out;
  if (auto mode = r.scalar(spec, "mode", "spec", sm); mode && *mode != "all")
    r.error(mark_at(spec["mode"]), "spec.mode",
            "'" + *mode + "' picks pods: " + kSelectorHelp.substr(0, kSelectorHelp.find(':')) +
                "; leave mode out (or all)");
  if (spec.contains("value"))
    r.error(mark_at(spec["value"]), "spec.value",
            "how many pods mode picks: there are no pods on a host; leave it out");

  static const std::map<std::string, std::string> kinds = {{"delay", "latency"},       {"loss", "loss"},
                                                           {"duplicate", "duplicate"}, {"corrupt", "corrupt"},
                                                           {"partition", "partition"}, {"bandwidth", "bandwidth"}};
  auto action = r.scalar(spec, "action", "spec", sm);
  if (!action) {
    if (!spec.contains("action"))
      r.error(sm, "spec.action", "missing (delay, loss, duplicate, corrupt, partition, bandwidth)");
    return r.out;
  }
  auto k = kinds.find(*action);
  if (k == kinds.end()) {
    r.error(mark_at(spec["action"]), "spec.action",
            "'" + *action +
                "': Faultline imports delay, loss, duplicate, corrupt, partition and bandwidth (netem: "
                "write one NetworkChaos per effect)");
    return r.out;
  }
  r.out.fault.action = *action;
  r.out.fault.words.push_back(k->second);
  // An effect's fields belong to its action only.
  for (const auto& [other, _] : kinds) {
    if (other != *action && other != "partition" && spec.contains(other))
      r.error(mark_at(spec[other]), "spec." + other, "a field of action " + other + ", not of " + *action);
  }

  // Targets.
  if (!spec.contains("externalTargets")) {
    r.error(sm, "spec.externalTargets",
            "required here: the peers (addresses, CIDRs or host names) the fault hits; a host's whole traffic is "
            "not a target");
  } else {
    const YAML::Node t = spec["externalTargets"];
    if (!t.IsSequence() || t.size() == 0) {
      r.error(mark_at(t, sm), "spec.externalTargets", "expected a list of addresses, CIDRs or host names");
    } else {
      for (size_t i = 0; i < t.size(); ++i) {
        const std::string p = "spec.externalTargets[" + std::to_string(i) + "]";
        if (!t[i].IsScalar() || t[i].Scalar().empty())
          r.error(mark_at(t[i], sm), p, "expected an address, CIDR or host name");
        else
          r.flag("--target", t[i].Scalar(), p, mark_at(t[i], sm));
      }
    }
  }
  if (auto d = r.scalar(spec, "direction", "spec", sm)) {
    static const std::map<std::string, std::string> dirs = {{"to", "egress"}, {"from", "ingress"}, {"both", "both"}};
    auto it = dirs.find(*d);
    if (it == dirs.end())
      r.error(mark_at(spec["direction"]), "spec.direction", "'" + *d + "': expected to, from or both");
    else
      r.flag("--direction", it->second, "spec.direction", mark_at(spec["direction"]));
  }
  if (auto dev = r.scalar(spec, "device", "spec", sm)) r.flag("--dev", *dev, "spec.device", mark_at(spec["device"]));
  if (auto dur = r.scalar(spec, "duration", "spec", sm)) {
    r.flag("--duration", *dur, "spec.duration", mark_at(spec["duration"]));
  } else if (!spec.contains("duration")) {
    r.error(sm, "spec.duration",
            "required here: a Faultline fault always ends (at most 1h); Chaos Mesh's run-until-deleted has no "
            "equivalent without a controller");
  }

  // The effect.
  auto effect = [&](const std::string& name, const std::set<std::string>& known) -> std::map<std::string, YAML::Node> {
    if (!spec.contains(name)) {
      r.error(sm, "spec." + name, "missing: action " + name + " needs its fields");
      return {};
    }
    return r.fields(spec[name], "spec." + name, mark_at(spec[name]), known);
  };
  auto percent = [&](const std::map<std::string, YAML::Node>& f, const std::string& field, const std::string& path,
                     const std::string& flag) {
    auto v = r.scalar(f, field, path, sm);
    if (!v) {
      if (!f.contains(field)) r.error(mark_at(spec[path.substr(5)]), path + "." + field, "missing");
      return;
    }
    if (!percent_text(*v)) {
      r.error(mark_at(f.at(field)), path + "." + field, "'" + *v + "': expected a percent, like \"25\"");
      return;
    }
    r.flag(flag, *v, path + "." + field, mark_at(f.at(field)));
  };
  // Correlation Faultline has no model for: accepted only when it cannot matter.
  auto no_correlation = [&](const std::map<std::string, YAML::Node>& f, const std::string& path,
                            const std::string& why) {
    auto c = r.scalar(f, "correlation", path, sm);
    if (c && !zero_text(*c)) r.error(mark_at(f.at("correlation")), path + ".correlation", "'" + *c + "': " + why);
  };
  if (*action == "delay") {
    auto f = effect("delay", {"latency", "jitter", "correlation", "reorder"});
    if (auto l = r.scalar(f, "latency", "spec.delay", sm))
      r.flag("--delay", *l, "spec.delay.latency", mark_at(f["latency"]));
    else if (spec.contains("delay") && !f.contains("latency"))
      r.error(mark_at(spec["delay"]), "spec.delay.latency", "missing");
    auto j = r.scalar(f, "jitter", "spec.delay", sm);
    const bool jitter = j && j->find_first_of("123456789") != std::string::npos;  // "0ms" is none
    if (jitter) r.flag("--jitter", *j, "spec.delay.jitter", mark_at(f["jitter"]));
    if (jitter)
      no_correlation(f, "spec.delay",
                     "Faultline draws each packet's jitter independently (correlation 0); leave correlation out");
    if (f.contains("reorder"))
      r.error(mark_at(f["reorder"]), "spec.delay.reorder", "reordering is not a Faultline fault; leave it out");
  } else if (*action == "loss") {
    auto f = effect("loss", {"loss", "correlation"});
    percent(f, "loss", "spec.loss", "--percent");
    if (auto c = r.scalar(f, "correlation", "spec.loss", sm); c && !zero_text(*c)) {
      if (!percent_text(*c))
        r.error(mark_at(f["correlation"]), "spec.loss.correlation", "'" + *c + "': expected a percent");
      else
        r.flag("--correlation", *c, "spec.loss.correlation", mark_at(f["correlation"]));
    }
  } else if (*action == "duplicate" || *action == "corrupt") {
    auto f = effect(*action, {*action, "correlation"});
    percent(f, *action, "spec." + *action, "--percent");
    no_correlation(f, "spec." + *action,
                   "Faultline decides each packet independently for " + *action +
                       " (correlation 0); correlated "
                       "decisions are for loss");
  } else if (*action == "bandwidth") {
    auto f = effect("bandwidth", {"rate", "limit", "buffer", "peakrate", "minburst"});
    if (auto rate = r.scalar(f, "rate", "spec.bandwidth", sm))
      r.flag("--rate", *rate, "spec.bandwidth.rate", mark_at(f["rate"]));
    else if (spec.contains("bandwidth") && !f.contains("rate"))
      r.error(mark_at(spec["bandwidth"]), "spec.bandwidth.rate", "missing");
    for (const char* tbf : {"limit", "buffer"}) {
      if (f.contains(tbf))
        r.out.fault.notes.push_back(std::string("spec.bandwidth.") + tbf +
                                    " (a tc tbf queue size) has no equivalent in Faultline's pacing and is not used");
    }
    for (const char* tbf : {"peakrate", "minburst"}) {
      if (f.contains(tbf))
        r.error(mark_at(f[tbf]), std::string("spec.bandwidth.") + tbf,
                "a second tbf bucket Faultline does not model: leave it out (rate alone is the cap)");
    }
  }
  if (r.out.fault.name.empty()) r.error(root, "metadata.name", "missing");
  std::sort(r.out.errors.begin(), r.out.errors.end(), [](const PolicyDiagnostic& a, const PolicyDiagnostic& b) {
    return std::tie(a.mark.line, a.mark.column) < std::tie(b.mark.line, b.mark.column);
  });
  return r.out;
}

}  // namespace faultline
