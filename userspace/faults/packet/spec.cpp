// FaultSpec names, validation and rendering.
#include "userspace/faults/packet/spec.h"

#include <netinet/in.h>

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
