// "kind": a packet fault <-> FaultSpec, checked with the CLI's own value
// parsers and validate(), so a value is refused with the words `faultctl run`
// uses, the flag renamed to the field.
#include "userspace/faults/packet/experiment.h"

#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/seeded_random.h"
#include "userspace/faults/spec_fields.h"

namespace faultline {
namespace {

using K = FieldKind;
constexpr double kMsPerNs = 1e-6;
constexpr double kSecPerNs = 1e-9;

constexpr ExperimentField kPacketFields[] = {
    {"kind", "kind", "", K::Text, "", {}, "loss, partition, flowdrop, corrupt, duplicate, dns, latency or bandwidth"},
    {"target",
     "target",
     "",
     K::List,
     "",
     {},
     "remote IP or CIDR prefix the fault acts on (repeatable, or comma-separated; a JSON array); faultctl also "
     "takes HOST:PORT and resolves a name, an experiment's JSON takes addresses only"},
    {"dev",
     "dev",
     "",
     K::Text,
     "",
     {},
     "one device, lo included, 1-15 characters (default: the devices the targets' routes leave through, lo for "
     "this host's own addresses; every non-loopback device without a target)"},
    {"netns", "netns", "", K::Text, "", {}, "network namespace: a name under /run/netns, a path or pid:N"},
    {"source", "source", "", K::Text, "", {}, "local address or CIDR prefix"},
    {"port", "port", "", K::Text, "", {}, "remote port: a number 1-65535, or a range A-B"},
    {"proto", "proto", "", K::Text, "", {}, "tcp, udp or icmp"},
    {"direction", "direction", "", K::Text, "", {}, "egress, ingress or both (default egress)"},
    {"cgroup", "cgroup", "", K::Text, "", {}, "cgroup v2 path whose packets are faulted (egress)"},
    {"percent", "percent", "", K::Number, "%", FieldRange{0, 100}, "probability in percent (default 100)"},
    {"correlation", "correlation", "", K::Number, "%", FieldRange{0, 100},
     "percent chance to repeat the previous decision (loss)"},
    {"loss_model", "loss-model", "", K::Text, "", {}, "Gilbert-Elliott loss, ge:p[,r[,1-h[,1-k]]] in percents (loss)"},
    {"domains",
     "domains",
     "",
     K::List,
     "",
     {},
     "names a dns fault blocks, with their subdomains: 1-1024 of them (repeatable, or comma-separated)"},
    {"delay_ms", "delay", "", K::Whole, "ms", FieldRange{1, FaultCaps::kMaxDelayNs* kMsPerNs},
     "added delay of a latency fault"},
    {"jitter_ms", "jitter", "", K::Whole, "ms", FieldRange{0, FaultCaps::kMaxJitterNs* kMsPerNs},
     "delay variation (needs the delay)"},
    {"distribution",
     "distribution",
     "",
     K::Text,
     "",
     {},
     "shape of the jitter: normal, pareto or uniform (needs the jitter)"},
    {"rate_bps", "rate", "", K::Whole, "bit/s", FieldRange{FaultCaps::kMinRateBps, FaultCaps::kMaxRateBps},
     "bandwidth cap of a bandwidth fault (the flag takes a unit: 10mbit, 500kbps)"},
    {"max_injections", "max-injections", "", K::Whole, "", FieldRange{1, FaultCaps::kMaxInjections},
     "stop injecting after this many packets were faulted (counted in the kernel, over all CPUs)"},
    {"start_after_ms",
     "start-after",
     "",
     K::Whole,
     "ms",
     {},
     "install the fault now, inert until this long has passed (less than the duration)"},
    {"seed",
     "seed",
     "",
     K::Whole,
     "",
     {},
     "seed of the fault's random decisions, 0 to 2^64-1 (in JSON a number or its decimal text), to replay a run "
     "(default: drawn, and printed and recorded either way)"},
    {"force", "force", "", K::Switch, "", {}, "allow a fault with no target (a whole device)"},
    {"duration_sec", "duration", "", K::Whole, "s", FieldRange{1, FaultCaps::kMaxDurationNs* kSecPerNs},
     "how long (required)"},
};

constexpr uint64_t kPacketMs = 1'000'000ULL;
constexpr uint64_t kPacketSec = 1'000'000'000ULL;

const ExperimentField* packet_field(const std::string& key) { return find_field(kPacketFields, key); }

// The packet fields as a flag table for spec_error_from_flags().
std::span<const FlagField> packet_flag_fields() {
  static const std::vector<FlagField> table = flag_fields_of(kPacketFields);
  return table;
}

// An error of the CLI's words ("--proto 'x': expected tcp, udp or icmp") for
// the field it names ("spec.proto: 'x': expected tcp, udp or icmp").
Error as_field_error(const Error& e, const char* field) {
  return spec_error_from_flags(e, packet_flag_fields(), field);
}

// One value of a field given as the flag's text: read with the CLI's parser.
template <typename T, typename Parse>
Result<T> text_value(const nlohmann::json& spec, const char* field, Parse parse) {
  auto text = spec_string(spec, field);
  if (!text) return text.error();
  auto v = parse(*text);
  if (!v) return as_field_error(v.error(), field);
  return *v;
}

Result<std::vector<Prefix>> read_targets(const nlohmann::json& spec) {
  const nlohmann::json& t = spec["target"];
  std::vector<std::string> texts;
  if (t.is_string()) {
    texts.push_back(t.get<std::string>());
  } else if (t.is_array() && !t.empty()) {
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_string())
        return spec_field_error("target[" + std::to_string(i) + "]", "must be an address or CIDR prefix (a string)");
      texts.push_back(t[i].get<std::string>());
    }
  } else {
    return spec_field_error("target", "must be an address or CIDR prefix, or a non-empty array of them");
  }
  std::vector<Prefix> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto prefix = parse_prefix(texts[i]);
    const std::string field = t.is_array() ? "target[" + std::to_string(i) + "]" : "target";
    if (!prefix) return spec_field_error(field, "not an address or CIDR prefix: " + prefix.error().message);
    out.push_back(*prefix);
  }
  return out;
}

Result<PortRange> read_port(const nlohmann::json& spec) {
  const nlohmann::json& p = spec["port"];
  std::string text;
  if (p.is_number_unsigned())
    text = std::to_string(p.get<uint64_t>());
  else if (p.is_string())
    text = p.get<std::string>();
  else
    return spec_field_error("port", "must be a port number 1-65535 or a range \"A-B\"");
  auto r = parse_port_range(text);
  if (!r) return spec_field_error("port", r.error().message);
  return *r;
}

Result<std::vector<std::string>> read_domains(const nlohmann::json& spec) {
  const nlohmann::json& d = spec["domains"];
  if (!d.is_array() || d.empty()) return spec_field_error("domains", "must be a non-empty array of domain names");
  std::vector<std::string> out;
  for (size_t i = 0; i < d.size(); ++i) {
    const std::string field = "domains[" + std::to_string(i) + "]";
    if (!d[i].is_string()) return spec_field_error(field, "must be a domain name (a string)");
    auto n = normalize_domain(d[i].get<std::string>());
    if (!n) return spec_field_error(field, n.error().message);
    if (std::find(out.begin(), out.end(), *n) == out.end()) out.push_back(*n);
  }
  return out;
}

Result<uint64_t> read_seed(const nlohmann::json& spec) {
  const nlohmann::json& v = spec["seed"];
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string() || v.is_number_integer()) {
    auto seed = parse_seed(v.is_string() ? v.get<std::string>() : v.dump());
    if (!seed) return spec_field_error("seed", seed.error().message);
    return *seed;
  }
  return spec_field_error("seed", "must be a whole number from 0 to 18446744073709551615 (or its decimal text)");
}

// A whole number of units (ms, s) that the CLI reads as a duration: large
// values are left to validate(), which words the caps as the CLI does.
Result<uint64_t> read_units(const nlohmann::json& spec, const char* field, uint64_t unit_ns) {
  return spec_uint(spec, field, 0, UINT64_MAX / unit_ns);
}

}  // namespace

std::span<const ExperimentField> packet_experiment_fields() { return kPacketFields; }

Result<FaultSpec> packet_spec_from_json(const nlohmann::json& spec) {
  if (!spec.is_object()) return input_error(EINVAL, "spec: not a JSON object");
  for (const auto& item : spec.items()) {
    const std::string& key = item.key();
    if (key == "grace_sec") return spec_field_error(key, "packet faults have no grace: they end at their deadline");
    if (packet_field(key) == nullptr && !is_guardrail_field(key))
      return spec_field_error(key, "not a field of a packet experiment");
  }
  FaultSpec s;
  if (!spec.contains("kind")) return spec_field_error("kind", "is required");
  auto kind_text = spec_string(spec, "kind");
  if (!kind_text) return kind_text.error();
  auto kind = kind_from_name(*kind_text);
  if (!kind) {
    std::string names;
    for (const auto& n : kind_names()) names += (names.empty() ? "" : ", ") + n;
    return spec_field_error("kind", "'" + *kind_text + "' is not a fault kind (" + names +
                                        "; syscall; tcp; http; process, cpu, memory, disk)");
  }
  s.kind = *kind;
  // The shape fields a kind does not take, as `faultctl run` refuses their flags.
  for (const auto& item : spec.items()) {
    const ExperimentField* f = packet_field(item.key());
    if (f == nullptr) continue;
    if (auto taken = check_kind_takes(s.kind, f->flag); !taken) return as_field_error(taken.error(), f->field);
  }
  // The caps of duration, delay and jitter are validate()'s, in its words
  // ("spec.delay_ms (--delay): 1m1s is over the cap of 60s").
  if (!spec.contains("duration_sec")) return spec_field_error("duration_sec", "is required");
  auto duration = read_units(spec, "duration_sec", kPacketSec);
  if (!duration) return duration.error();
  s.duration_ns = *duration * kPacketSec;
  if (spec.contains("delay_ms")) {
    auto d = read_units(spec, "delay_ms", kPacketMs);
    if (!d) return d.error();
    if (*d == 0) return spec_field_error("delay_ms", "must be above 0");
    s.delay_ns = *d * kPacketMs;
  }
  if (spec.contains("jitter_ms")) {
    auto j = read_units(spec, "jitter_ms", kPacketMs);
    if (!j) return j.error();
    s.jitter_ns = *j * kPacketMs;
  }
  if (spec.contains("percent")) {
    auto p = spec_percent(spec, "percent");
    if (!p) return p.error();
    s.percent = *p;
  }
  if (spec.contains("correlation")) {
    auto c = spec_percent(spec, "correlation");
    if (!c) return c.error();
    s.correlation = *c;
  }
  if (spec.contains("loss_model")) {
    if (spec.contains("percent")) return spec_field_error("loss_model", "sets the loss rate itself; drop spec.percent");
    if (spec.contains("correlation"))
      return spec_field_error("loss_model", "and spec.correlation are two different loss models; pick one");
    auto g = text_value<GeModel>(spec, "loss_model", parse_loss_model);
    if (!g) return g.error();
    s.ge = *g;
  }
  if (spec.contains("dev")) {
    auto dev = spec_string(spec, "dev");
    if (!dev) return dev.error();
    if (auto ok = check_dev_name(*dev); !ok) return as_field_error(ok.error(), "dev");
    s.dev = *dev;
  }
  if (spec.contains("netns")) {
    auto ns = spec_string(spec, "netns");
    if (!ns) return ns.error();
    if (auto ok = check_netns_name(*ns); !ok) return as_field_error(ok.error(), "netns");
    s.netns = *ns;
  }
  if (spec.contains("target")) {
    auto t = read_targets(spec);
    if (!t) return t.error();
    s.targets = std::move(*t);
  }
  if (spec.contains("source")) {
    auto src = text_value<Prefix>(spec, "source", [](const std::string& x) { return parse_prefix(x); });
    if (!src) return src.error();
    s.source = *src;
  }
  if (spec.contains("port")) {
    auto p = read_port(spec);
    if (!p) return p.error();
    s.ports = *p;
  }
  if (spec.contains("proto")) {
    auto p = text_value<uint8_t>(spec, "proto", parse_proto);
    if (!p) return p.error();
    s.proto = *p;
    if (s.proto == IPPROTO_ICMP && s.ports.hi != 0) return spec_field_error("proto", "icmp has no ports; drop port");
  }
  if (spec.contains("direction")) {
    auto d = text_value<uint8_t>(spec, "direction", parse_direction);
    if (!d) return d.error();
    s.dir_mask = *d;
  }
  if (spec.contains("cgroup")) {
    auto cg = spec_string(spec, "cgroup");
    if (!cg) return cg.error();
    if (cg->empty()) return spec_field_error("cgroup", "empty path");
    s.cgroup = *cg;
  }
  if (spec.contains("domains")) {
    auto d = read_domains(spec);
    if (!d) return d.error();
    s.domains = std::move(*d);
  }
  if (spec.contains("distribution")) {
    if (!spec.contains("jitter_ms")) return spec_field_error("distribution", "shapes jitter_ms; give jitter_ms too");
    auto d = text_value<uint32_t>(spec, "distribution", parse_distribution);
    if (!d) return d.error();
    s.dist = *d;
  }
  if (spec.contains("rate_bps")) {
    auto r = spec_uint(spec, "rate_bps", 0, UINT64_MAX);
    if (!r) return r.error();
    // In the words of --rate for the same rate in bits ("'1000bit' is below
    // the minimum of 8kbit").
    if (!in_range(*packet_field("rate_bps"), static_cast<double>(*r))) {
      auto words = parse_rate_bps(std::to_string(*r) + "bit");
      return spec_field_error(
          "rate_bps", words ? "must be within " + field_range_text(*packet_field("rate_bps")) : words.error().message);
    }
    s.rate_bps = *r;
  }
  if (spec.contains("max_injections")) {
    auto n = spec_count(spec, "max_injections", 1, FaultCaps::kMaxInjections);
    if (!n) return n.error();
    s.max_injections = *n;
  }
  if (spec.contains("start_after_ms")) {
    auto ms = read_units(spec, "start_after_ms", kPacketMs);
    if (!ms) return ms.error();
    if (*ms == 0) return spec_field_error("start_after_ms", "must be above 0 (leave it out to start at once)");
    s.start_after_ns = *ms * kPacketMs;
  }
  if (spec.contains("seed")) {
    auto seed = read_seed(spec);
    if (!seed) return seed.error();
    s.seed = *seed;
  } else if (kind_is_random(s.kind)) {
    s.seed = draw_seed();
    s.seed_drawn = true;
  }
  if (spec.contains("force")) {
    auto f = spec_bool(spec, "force");
    if (!f) return f.error();
    s.force = *f;
  }
  const bool is_latency = s.kind == FaultKind::Latency;
  if (spec.contains("jitter_ms") && !spec.contains("delay_ms")) return spec_field_error("jitter_ms", "needs delay_ms");
  if (auto v = validate(s); !v) return as_field_error(v.error(), is_latency ? "delay_ms" : "kind");
  return s;
}

Result<nlohmann::json> packet_spec_to_json(const FaultSpec& s) {
  nlohmann::json spec{{"kind", kind_name(s.kind)}};
  if (s.targets.size() == 1)
    spec["target"] = s.targets[0].str();
  else if (!s.targets.empty()) {
    nlohmann::json ts = nlohmann::json::array();
    for (const auto& t : s.targets) ts.push_back(t.str());
    spec["target"] = ts;
  }
  auto secs = whole_units(s.duration_ns, kPacketSec, "--duration");
  if (!secs) return secs.error();
  spec["duration_sec"] = *secs;
  if (!s.dev.empty()) spec["dev"] = s.dev;
  if (!s.netns.empty()) spec["netns"] = s.netns;
  if (s.source) spec["source"] = s.source->str();
  if (s.ports.hi != 0) {
    if (s.ports.lo == s.ports.hi)
      spec["port"] = s.ports.lo;
    else
      spec["port"] = std::to_string(s.ports.lo) + "-" + std::to_string(s.ports.hi);
  }
  if (s.proto != 0) spec["proto"] = proto_name(s.proto);
  if (s.dir_mask != FL_DIR_EGRESS) spec["direction"] = direction_name(s.dir_mask);
  if (!s.cgroup.empty()) spec["cgroup"] = s.cgroup;
  if (s.ge)
    spec["loss_model"] = loss_model_text(*s.ge);
  else if (s.percent != FaultSpec{}.percent)
    spec["percent"] = s.percent;
  if (s.correlation != 0) spec["correlation"] = s.correlation;
  if (!s.domains.empty()) spec["domains"] = s.domains;
  if (s.delay_ns) {
    auto ms = whole_units(s.delay_ns, kPacketMs, "--delay");
    if (!ms) return ms.error();
    spec["delay_ms"] = *ms;
  }
  if (s.jitter_ns || (s.kind == FaultKind::Latency && s.dist != FL_DIST_NORMAL)) {
    auto ms = whole_units(s.jitter_ns, kPacketMs, "--jitter");
    if (!ms) return ms.error();
    spec["jitter_ms"] = *ms;
  }
  if (s.dist != FL_DIST_NORMAL) spec["distribution"] = dist_name(s.dist);
  if (s.rate_bps != 0) spec["rate_bps"] = s.rate_bps;
  if (s.max_injections != 0) spec["max_injections"] = s.max_injections;
  if (s.start_after_ns != 0) {
    auto ms = whole_units(s.start_after_ns, kPacketMs, "--start-after");
    if (!ms) return ms.error();
    spec["start_after_ms"] = *ms;
  }
  // A drawn seed stays with the reader, which draws its own (and says so);
  // a given one is a decimal string, which a double-based JSON reader keeps.
  if (s.seed && !s.seed_drawn) spec["seed"] = std::to_string(*s.seed);
  if (s.force) spec["force"] = true;
  return spec;
}

}  // namespace faultline
