// FaultSpec names, validation and rendering.
#include "userspace/faults/packet/spec.h"

#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <sstream>

namespace faultline {
namespace {

struct KindName {
  FaultKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {FaultKind::Loss, "loss"},       {FaultKind::Partition, "partition"}, {FaultKind::Flowdrop, "flowdrop"},
    {FaultKind::Corrupt, "corrupt"}, {FaultKind::Duplicate, "duplicate"}, {FaultKind::Dns, "dns"},
    {FaultKind::Latency, "latency"}, {FaultKind::Bandwidth, "bandwidth"},
};

std::string fmt_percent(double p) {
  std::ostringstream o;
  o << p << "%";
  return o.str();
}

}  // namespace

const char* kind_name(FaultKind k) {
  for (const auto& e : kKinds) {
    if (e.kind == k) return e.name;
  }
  return "?";
}

std::optional<FaultKind> kind_from_name(const std::string& s) {
  for (const auto& e : kKinds) {
    if (s == e.name) return e.kind;
  }
  return std::nullopt;
}

const std::vector<std::string>& kind_names() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> out;
    for (const auto& e : kKinds) out.emplace_back(e.name);
    return out;
  }();
  return v;
}

const char* dist_name(uint32_t d) {
  switch (d) {
    case FL_DIST_UNIFORM:
      return "uniform";
    case FL_DIST_NORMAL:
      return "normal";
    case FL_DIST_PARETO:
      return "pareto";
    default:
      return "?";
  }
}

const char* proto_name(uint8_t p) {
  switch (p) {
    case 0:
      return "any";
    case IPPROTO_TCP:
      return "tcp";
    case IPPROTO_UDP:
      return "udp";
    case IPPROTO_ICMP:
      return "icmp";
    default:
      return "?";
  }
}

bool kind_is_random(FaultKind k) {
  return k == FaultKind::Loss || k == FaultKind::Corrupt || k == FaultKind::Duplicate || k == FaultKind::Dns ||
         k == FaultKind::Latency;
}

Result<std::string> normalize_domain(const std::string& s) {
  std::string d = s;
  if (!d.empty() && d.back() == '.') d.pop_back();
  if (d.empty()) return make_error(EINVAL, "an empty domain name");
  if (d.size() > 253) return make_error(EINVAL, "'" + s + "' is longer than 253 characters");
  size_t label = 0;
  for (char& c : d) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '.') {
      if (label == 0) return make_error(EINVAL, "'" + s + "' has an empty label");
      label = 0;
      continue;
    }
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
      return make_error(
          EINVAL, "'" + s + "' has a character that is not allowed in a domain name: '" + std::string(1, c) + "'");
    if (++label > 63) return make_error(EINVAL, "'" + s + "' has a label longer than 63 characters");
  }
  if (label == 0) return make_error(EINVAL, "'" + s + "' has an empty label");
  return d;
}

Status check_kind_takes(FaultKind kind, const std::string& flag) {
  struct KindFlags {
    FaultKind kind;
    std::vector<std::string> flags;
  };
  static const std::vector<std::string> kSpecific = {"percent", "correlation",  "loss-model", "domains", "delay",
                                                     "jitter",  "distribution", "rate",       "seed",    "via"};
  static const KindFlags kTaken[] = {
      {FaultKind::Loss, {"percent", "correlation", "loss-model", "seed"}},
      {FaultKind::Partition, {}},
      {FaultKind::Flowdrop, {}},
      {FaultKind::Corrupt, {"percent", "seed"}},
      {FaultKind::Duplicate, {"percent", "seed"}},
      {FaultKind::Dns, {"domains", "percent", "seed"}},
      {FaultKind::Latency, {"delay", "jitter", "distribution", "percent", "seed", "via"}},
      {FaultKind::Bandwidth, {"rate", "via"}},
  };
  if (std::find(kSpecific.begin(), kSpecific.end(), flag) == kSpecific.end()) return {};
  for (const auto& k : kTaken) {
    if (k.kind == kind && std::find(k.flags.begin(), k.flags.end(), flag) != k.flags.end()) return {};
  }
  return input_error(EINVAL, "--" + flag + " does not apply to a " + std::string(kind_name(kind)) + " fault");
}

Status check_dev_name(const std::string& dev) {
  if (dev.empty() || dev.size() > 15 || dev.find('/') != std::string::npos)
    return input_error(EINVAL, "--dev '" + dev + "': not a device name (1-15 characters, no '/')");
  return {};
}

Status check_netns_name(const std::string& ns) {
  if (ns.empty()) return input_error(EINVAL, "--netns: empty name");
  if (ns.size() > 255 || ns.find("..") != std::string::npos ||
      ns.find_first_of(std::string("\0\n", 2)) != std::string::npos)
    return input_error(EINVAL, "--netns '" + ns + "': not a namespace name, path or pid:N (1-255 characters, no '..')");
  return {};
}

Result<uint8_t> parse_proto(const std::string& p) {
  if (p == "tcp") return uint8_t(IPPROTO_TCP);
  if (p == "udp") return uint8_t(IPPROTO_UDP);
  if (p == "icmp") return uint8_t(IPPROTO_ICMP);
  return input_error(EINVAL, "--proto '" + p + "': expected tcp, udp or icmp");
}

Result<uint8_t> parse_direction(const std::string& d) {
  if (d == "egress") return uint8_t(FL_DIR_EGRESS);
  if (d == "ingress") return uint8_t(FL_DIR_INGRESS);
  if (d == "both") return uint8_t(FL_DIR_EGRESS | FL_DIR_INGRESS);
  return input_error(EINVAL, "--direction '" + d + "': expected egress, ingress or both");
}

const char* direction_name(uint8_t dir_mask) {
  return dir_mask == (FL_DIR_EGRESS | FL_DIR_INGRESS) ? "both" : dir_mask == FL_DIR_INGRESS ? "ingress" : "egress";
}

Result<uint32_t> parse_distribution(const std::string& d) {
  if (d == "normal") return uint32_t(FL_DIST_NORMAL);
  if (d == "pareto") return uint32_t(FL_DIST_PARETO);
  if (d == "uniform") return uint32_t(FL_DIST_UNIFORM);
  return input_error(EINVAL, "--distribution '" + d + "': expected normal, pareto or uniform");
}

Result<GeModel> parse_loss_model(const std::string& s) {
  auto refuse = [&](const std::string& why) { return input_error(EINVAL, "--loss-model '" + s + "': " + why); };
  if (s.rfind("ge:", 0) != 0) return refuse("expected ge:p[,r[,1-h[,1-k]]] in percents");
  std::vector<double> v;
  const std::string rest = s.substr(3);
  size_t start = 0;
  while (start <= rest.size()) {
    const auto comma = rest.find(',', start);
    auto p = parse_percent(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!p) return refuse(p.error().message);
    v.push_back(*p);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (v.empty() || v.size() > 4) return refuse("expected 1 to 4 percents after ge:");
  GeModel g;
  g.p = v[0];
  g.r = v.size() > 1 ? v[1] : 100 - v[0];
  g.loss_bad = v.size() > 2 ? v[2] : 100;
  g.loss_good = v.size() > 3 ? v[3] : 0;
  if (g.p <= 0) return refuse("p must be above 0");
  return g;
}

std::string loss_model_text(const GeModel& g) {
  // The shortest text each percent reads back from exactly.
  auto num = [](double d) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, d);
    return std::string(buf, r.ptr);
  };
  return "ge:" + num(g.p) + "," + num(g.r) + "," + num(g.loss_bad) + "," + num(g.loss_good);
}

Status validate(const FaultSpec& s) {
  if (s.duration_ns == 0) return make_error(EINVAL, "--duration is required (at most 1h)");
  if (s.duration_ns > FaultCaps::kMaxDurationNs)
    return make_error(ERANGE, "--duration " + format_duration(s.duration_ns) + " is over the cap of 1h");
  if (s.duration_ns < 100'000'000ULL) return make_error(ERANGE, "--duration must be at least 100ms");
  if (s.percent < 0 || s.percent > 100) return make_error(ERANGE, "--percent must be within 0-100");
  if (s.correlation < 0 || s.correlation > 100) return make_error(ERANGE, "--correlation must be within 0-100");
  if (s.delay_ns > FaultCaps::kMaxDelayNs)
    return make_error(ERANGE, "--delay " + format_duration(s.delay_ns) + " is over the cap of 60s");
  if (s.jitter_ns > FaultCaps::kMaxJitterNs)
    return make_error(ERANGE, "--jitter " + format_duration(s.jitter_ns) + " is over the cap of 10s");
  if (s.max_injections > FaultCaps::kMaxInjections)
    return make_error(ERANGE,
                      "--max-injections " + std::to_string(s.max_injections) + " is over the cap of 1000000000");
  if (s.start_after_ns >= s.duration_ns)
    return make_error(EINVAL, "--start-after " + format_duration(s.start_after_ns) +
                                  " is not shorter than --duration " + format_duration(s.duration_ns) +
                                  ": the fault would never start");
  if (s.seed && !kind_is_random(s.kind))
    return make_error(EINVAL, std::string("--seed: a ") + kind_name(s.kind) + " fault makes no random decision");
  if (s.domains.size() > FaultCaps::kMaxDomains) return make_error(ERANGE, "--domains lists more than 1024 names");
  if (s.ports.hi < s.ports.lo) return make_error(EINVAL, "--port: the range ends before it starts");
  if ((s.dir_mask & (FL_DIR_EGRESS | FL_DIR_INGRESS)) == 0) return make_error(EINVAL, "--direction selects nothing");

  switch (s.kind) {
    case FaultKind::Flowdrop:
      if (s.targets.empty()) return make_error(EINVAL, "flowdrop needs at least one --target address");
      for (const auto& t : s.targets) {
        if (!t.exact())
          return make_error(EINVAL,
                            "--target " + t.str() + ": flowdrop blackholes single addresses; use partition for a CIDR");
      }
      break;
    case FaultKind::Dns:
      if (s.domains.empty()) return make_error(EINVAL, "dns needs --domains (a comma-separated list)");
      if (s.targets.size() > 1)
        return make_error(EINVAL, "--target: a dns fault takes at most one resolver address or CIDR");
      if (s.ports.hi != 0) return make_error(EINVAL, "--port: a dns fault always matches UDP port 53");
      if (s.proto != 0 && s.proto != IPPROTO_UDP)
        return make_error(EINVAL, "--proto: a dns fault matches UDP queries only");
      break;
    case FaultKind::Latency:
      if (s.delay_ns == 0) return make_error(EINVAL, "latency needs --delay (at most 60s)");
      [[fallthrough]];
    case FaultKind::Bandwidth:
      if (s.kind == FaultKind::Bandwidth && s.rate_bps == 0) return make_error(EINVAL, "bandwidth needs --rate");
      if (s.dir_mask != FL_DIR_EGRESS)
        return make_error(EINVAL, "--direction: delay and rate work on egress only (EDT departs packets later)");
      break;
    default:
      break;
  }
  if (!s.cgroup.empty() && s.dir_mask != FL_DIR_EGRESS)
    return make_error(EINVAL, "--cgroup: a cgroup owns only the packets it sends; use --direction egress");
  if (s.ge && (s.ge->p <= 0 || s.ge->p > 100 || s.ge->r < 0 || s.ge->r > 100 || s.ge->loss_bad < 0 ||
               s.ge->loss_bad > 100 || s.ge->loss_good < 0 || s.ge->loss_good > 100))
    return make_error(ERANGE, "--loss-model: every probability is a percent within 0-100 and p > 0");
  bool scoped = !s.targets.empty() || s.kind == FaultKind::Dns || !s.cgroup.empty();
  if (!scoped && !s.force)
    return make_error(
        EINVAL, "no --target: this fault would hit every packet of the device; add --target, --cgroup, or --force");
  return {};
}

nlohmann::json FaultSpec::to_json() const {
  nlohmann::json j;
  j["kind"] = kind_name(kind);
  j["netns"] = netns.empty() ? "host" : netns;
  if (!dev.empty()) j["dev"] = dev;
  std::vector<std::string> ts;
  for (size_t i = 0; i < targets.size() && i < 8; ++i) ts.push_back(targets[i].str());
  if (!ts.empty()) j["targets"] = ts;
  if (targets.size() > 8) j["targets_total"] = targets.size();
  if (source) j["source"] = source->str();
  if (ports.hi)
    j["port"] =
        ports.lo == ports.hi ? std::to_string(ports.lo) : std::to_string(ports.lo) + "-" + std::to_string(ports.hi);
  if (proto) j["proto"] = proto_name(proto);
  j["direction"] = dir_mask == (FL_DIR_EGRESS | FL_DIR_INGRESS) ? "both"
                   : dir_mask == FL_DIR_EGRESS                  ? "egress"
                                                                : "ingress";
  if (!cgroup.empty()) j["cgroup"] = cgroup;
  switch (kind) {
    case FaultKind::Loss:
      if (ge) {
        j["loss_model"] = {{"p", ge->p}, {"r", ge->r}, {"loss_bad", ge->loss_bad}, {"loss_good", ge->loss_good}};
      } else {
        j["percent"] = percent;
        if (correlation > 0) j["correlation"] = correlation;
      }
      break;
    case FaultKind::Corrupt:
    case FaultKind::Duplicate:
    case FaultKind::Dns:
      j["percent"] = percent;
      if (kind == FaultKind::Dns) {
        std::vector<std::string> ds(domains.begin(), domains.begin() + std::min<size_t>(domains.size(), 8));
        j["domains"] = ds;
      }
      break;
    case FaultKind::Latency:
      j["delay"] = format_duration(delay_ns);
      if (jitter_ns) {
        j["jitter"] = format_duration(jitter_ns);
        j["distribution"] = dist_name(dist);
      }
      break;
    case FaultKind::Bandwidth:
      j["rate_bps"] = rate_bps;
      break;
    default:
      break;
  }
  if (max_injections) j["max_injections"] = max_injections;
  if (start_after_ns) j["start_after"] = format_duration(start_after_ns);
  // A string: a 64-bit seed read as a JSON number by a double-based reader
  // (jq, JavaScript) would come back as another seed.
  if (seed) {
    j["seed"] = std::to_string(*seed);
    j["seed_source"] = seed_drawn ? "drawn" : "given";
  }
  j["duration"] = format_duration(duration_ns);
  return j;
}

std::string FaultSpec::summary() const {
  std::ostringstream o;
  o << kind_name(kind);
  if (kind == FaultKind::Loss) o << " " << (ge ? "gilbert-elliott" : fmt_percent(percent));
  if (kind == FaultKind::Corrupt || kind == FaultKind::Duplicate) o << " " << fmt_percent(percent);
  if (kind == FaultKind::Latency) o << " +" << format_duration(delay_ns);
  if (!targets.empty()) {
    o << " to " << targets[0].str();
    if (targets.size() > 1) o << " (+" << targets.size() - 1 << ")";
  }
  if (!domains.empty()) o << " for " << domains[0] << (domains.size() > 1 ? ",..." : "");
  if (!netns.empty()) o << " in netns " << netns;
  if (max_injections) o << ", at most " << max_injections << (max_injections == 1 ? " packet" : " packets");
  if (start_after_ns) o << ", from " << format_duration(start_after_ns) << " in";
  if (seed) o << ", seed " << *seed;
  return o.str();
}

}  // namespace faultline
