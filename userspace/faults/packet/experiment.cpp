// "kind": a packet fault <-> FaultSpec, checked with the CLI's validate().
#include "userspace/faults/packet/experiment.h"

#include <algorithm>
#include <cmath>

#include "base/seeded_random.h"
#include "userspace/faults/spec_fields.h"

namespace faultline {
namespace {

constexpr ExperimentField kPacketFields[] = {
    {"kind", "kind", "", "loss, partition, flowdrop, corrupt, duplicate, latency or bandwidth"},
    {"target", "target", "", "remote IP or CIDR prefix the fault acts on (required)"},
    {"dev", "dev", "", "one device, 1-15 characters (default: the devices the target's routes leave through)"},
    {"netns", "netns", "", "network namespace: a name under /run/netns or a path, 1-255 characters"},
    {"percent", "percent", "%", "probability in percent, 0-100 (default 100)"},
    {"delay_ms", "delay", "ms", "added delay of a latency fault, 1-60000"},
    {"jitter_ms", "jitter", "ms", "delay variation, 0-10000 (needs delay_ms)"},
    {"duration_sec", "duration", "s", "how long, 1-3600 (required)"},
};

constexpr uint64_t kPacketMs = 1'000'000ULL;
constexpr uint64_t kPacketSec = 1'000'000'000ULL;

bool is_packet_field(const std::string& key) {
  return std::any_of(std::begin(kPacketFields), std::end(kPacketFields),
                     [&](const ExperimentField& f) { return key == f.field; });
}

}  // namespace

std::span<const ExperimentField> packet_experiment_fields() { return kPacketFields; }

Result<FaultSpec> packet_spec_from_json(const nlohmann::json& spec) {
  if (!spec.is_object()) return input_error(EINVAL, "spec: not a JSON object");
  for (const auto& item : spec.items()) {
    const std::string& key = item.key();
    if (key == "grace_sec") return spec_field_error(key, "packet faults have no grace: they end at their deadline");
    if (!is_packet_field(key) && !is_guardrail_field(key))
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
  // A DNS fault is scoped by names (faultctl --domains), which the model does not carry yet.
  if (*kind == FaultKind::Dns) return spec_field_error("kind", "dns faults are not taken by an experiment yet");
  s.kind = *kind;
  auto duration = spec_duration_ns(spec, kPacketSec, FaultCaps::kMaxDurationNs);
  if (!duration) return duration.error();
  s.duration_ns = *duration;
  if (spec.contains("delay_ms")) {
    auto d = spec_uint(spec, "delay_ms", 0, FaultCaps::kMaxDelayNs / kPacketMs);
    if (!d) return d.error();
    s.delay_ns = *d * kPacketMs;
  }
  if (spec.contains("jitter_ms")) {
    auto j = spec_uint(spec, "jitter_ms", 0, FaultCaps::kMaxJitterNs / kPacketMs);
    if (!j) return j.error();
    s.jitter_ns = *j * kPacketMs;
  }
  if (spec.contains("percent")) {
    auto p = spec_number(spec, "percent");
    if (!p) return p.error();
    if (*p < 0 || *p > 100) return spec_field_error("percent", "must be within 0-100");
    s.percent = *p;
  }
  if (spec.contains("dev")) {
    auto dev = spec_string(spec, "dev");
    if (!dev) return dev.error();
    if (dev->empty() || dev->size() > 15 || dev->find('/') != std::string::npos)
      return spec_field_error("dev", "must be a device name of 1-15 characters");
    s.dev = *dev;
  }
  if (spec.contains("netns")) {
    auto ns = spec_string(spec, "netns");
    if (!ns) return ns.error();
    if (ns->empty() || ns->size() > 255 || ns->find("..") != std::string::npos ||
        ns->find_first_of(std::string("\0\n", 2)) != std::string::npos)
      return spec_field_error("netns", "must be a network namespace name or path of 1-255 characters");
    s.netns = *ns;
  }
  const bool is_latency = s.kind == FaultKind::Latency;
  if (is_latency && s.delay_ns == 0) return spec_field_error("delay_ms", "a latency fault needs delay_ms > 0");
  if (!is_latency && spec.contains("delay_ms"))
    return spec_field_error("delay_ms", "only a latency fault takes a delay");
  if (spec.contains("jitter_ms") && !spec.contains("delay_ms")) return spec_field_error("jitter_ms", "needs delay_ms");
  if (!spec.contains("target"))
    return spec_field_error("target", "is required: the address or prefix the fault acts on");
  auto target = spec_string(spec, "target");
  if (!target) return target.error();
  auto prefix = parse_prefix(*target);
  if (!prefix) return spec_field_error("target", "not an address or CIDR prefix: " + prefix.error().message);
  s.targets = {*prefix};
  if (kind_is_random(s.kind)) {
    s.seed = draw_seed();
    s.seed_drawn = true;
  }
  if (auto v = validate(s); !v) return spec_field_error(is_latency ? "delay_ms" : "kind", v.error().message);
  return s;
}

Result<nlohmann::json> packet_spec_to_json(const FaultSpec& s) {
  auto refuse = [](const char* flag) {
    return input_error(
        EINVAL, std::string(flag) + " cannot be carried by an experiment: give it to `faultctl run` on the host");
  };
  if (s.kind == FaultKind::Dns) return refuse("--domains (a dns fault)");
  if (s.source) return refuse("--source");
  if (s.ports.lo != 0 || s.ports.hi != 0) return refuse("--port");
  if (s.proto != 0) return refuse("--proto");
  if (s.dir_mask != FL_DIR_EGRESS) return refuse("--direction");
  if (!s.cgroup.empty()) return refuse("--cgroup");
  if (s.correlation != 0) return refuse("--correlation");
  if (s.ge) return refuse("--loss-model");
  if (s.dist != FL_DIST_NORMAL) return refuse("--distribution");
  if (s.rate_bps != 0) return refuse("--rate (a bandwidth fault)");
  if (s.max_injections != 0) return refuse("--max-injections");
  if (s.start_after_ns != 0) return refuse("--start-after");
  if (s.seed && !s.seed_drawn) return refuse("--seed");
  if (s.force) return refuse("--force");
  if (s.targets.size() != 1) return input_error(EINVAL, "--target: an experiment takes one address or prefix");
  nlohmann::json spec{{"kind", kind_name(s.kind)}, {"target", s.targets[0].str()}};
  auto secs = whole_units(s.duration_ns, kPacketSec, "--duration");
  if (!secs) return secs.error();
  spec["duration_sec"] = *secs;
  if (!s.dev.empty()) spec["dev"] = s.dev;
  if (!s.netns.empty()) spec["netns"] = s.netns;
  if (s.percent != FaultSpec{}.percent) spec["percent"] = s.percent;
  if (s.delay_ns) {
    auto ms = whole_units(s.delay_ns, kPacketMs, "--delay");
    if (!ms) return ms.error();
    spec["delay_ms"] = *ms;
  }
  if (s.jitter_ns) {
    auto ms = whole_units(s.jitter_ns, kPacketMs, "--jitter");
    if (!ms) return ms.error();
    spec["jitter_ms"] = *ms;
  }
  return spec;
}

}  // namespace faultline
