// The spec's fields, caps and combinations. The caps are the packet faults'
// (FaultCaps in userspace/faults/packet/spec.h), so the server and faultctl
// refuse the same values.
#include "cp/api/experiment_spec.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "userspace/faults/packet/spec.h"
#include "userspace/faults/resource/experiment_spec.h"
#include "userspace/faults/spec_fields.h"
#include "userspace/faults/stream/experiment_spec.h"
#include "userspace/faults/syscall/experiment_spec.h"
#include "userspace/net/address.h"

namespace faultline::cp {
namespace {

// The fields of every kind: the run's length, its guardrails and record.
const std::vector<FieldRule> kCommonFields = {
    {"kind", JsonType::String, true},
    {"duration_sec", JsonType::Integer, true},
    {"interval_sec", JsonType::Integer},
    {"health_url", JsonType::String},
    {"health_max_latency_ms", JsonType::Integer},
    {"prometheus_url", JsonType::String},
    {"query", JsonType::String},
    {"abort_above", JsonType::Number},
    {"abort_below", JsonType::Number},
    {"kernel_signal", JsonType::String},
    {"hypothesis", JsonType::String},
    {"steady_state_sec", JsonType::Integer},
};

// A packet fault's: the common ones and its own.
const std::vector<FieldRule> kSpecFields = [] {
  std::vector<FieldRule> f = kCommonFields;
  f.insert(f.end(), {{"dev", JsonType::String},
                     {"target", JsonType::String},
                     {"delay_ms", JsonType::Integer},
                     {"jitter_ms", JsonType::Integer},
                     {"percent", JsonType::Number},
                     {"grace_sec", JsonType::Integer},
                     {"netns", JsonType::String}});
  return f;
}();

constexpr int64_t kMaxDelayMs = static_cast<int64_t>(FaultCaps::kMaxDelayNs / 1'000'000);
constexpr int64_t kMaxJitterMs = static_cast<int64_t>(FaultCaps::kMaxJitterNs / 1'000'000);
constexpr int64_t kMaxDurationSec = static_cast<int64_t>(FaultCaps::kMaxDurationNs / 1'000'000'000);
static_assert(kMaxDelayMs == 60'000 && kMaxJitterMs == 10'000 && kMaxDurationSec == 3600);

ApiError bad(const std::string& field, std::string message) {
  return ApiError{400, "spec." + field, std::move(message)};
}

std::optional<ApiError> in_range(const nlohmann::json& spec, const char* field, int64_t lo, int64_t hi) {
  if (!spec.contains(field)) return std::nullopt;
  const auto v = spec[field].get<int64_t>();
  if (v < lo || v > hi)
    return bad(field,
               "must be within " + std::to_string(lo) + "-" + std::to_string(hi) + " (got " + std::to_string(v) + ")");
  return std::nullopt;
}

bool is_http_url(const std::string& s) {
  return (s.rfind("http://", 0) == 0 && s.size() > 7) || (s.rfind("https://", 0) == 0 && s.size() > 8);
}

// The guardrail and record fields, the same for every kind.
std::optional<ApiError> check_guardrails(const nlohmann::json& spec) {
  // faultctl's --interval cap (100ms-10m), in whole seconds.
  if (auto e = in_range(spec, "interval_sec", 1, 600)) return e;
  if (auto e = in_range(spec, "health_max_latency_ms", 1, kMaxDelayMs)) return e;
  for (const char* url : {"health_url", "prometheus_url"})
    if (spec.contains(url) && !is_http_url(spec[url].get<std::string>()))
      return bad(url, "must be an http:// or https:// URL");
  if (spec.contains("interval_sec") && !spec.contains("health_url") && !spec.contains("query"))
    return bad("interval_sec", "sets how often health_url and query are read: give one of them");
  if (spec.contains("health_max_latency_ms") && !spec.contains("health_url"))
    return bad("health_max_latency_ms", "needs health_url");
  if (spec.contains("query") != spec.contains("prometheus_url"))
    return bad(spec.contains("query") ? "prometheus_url" : "query",
               "a Prometheus guardrail needs both prometheus_url and query");
  if (spec.contains("query") && spec["query"].get<std::string>().size() > 4096)
    return bad("query", "is over 4096 bytes");
  if (spec.contains("kernel_signal")) {
    const auto s = spec["kernel_signal"].get<std::string>();
    if (s != "tcp_retransmits" && s != "tcp_resets")
      return bad("kernel_signal", "must be tcp_retransmits or tcp_resets");
    if (!spec.contains("abort_above")) return bad("abort_above", "a kernel signal guardrail needs abort_above");
  }
  for (const char* limit : {"abort_above", "abort_below"}) {
    if (!spec.contains(limit)) continue;
    if (!spec.contains("query") && !spec.contains("kernel_signal"))
      return bad(limit, "needs a guardrail to read: query (with prometheus_url) or kernel_signal");
    if (!std::isfinite(spec[limit].get<double>())) return bad(limit, "must be a finite number");
  }
  if (spec.contains("abort_below") && spec.contains("kernel_signal") && !spec.contains("query"))
    return bad("abort_below", "a kernel signal guardrail takes abort_above only");
  const bool guarded = spec.contains("health_url") || spec.contains("query") || spec.contains("kernel_signal");
  if (spec.contains("hypothesis")) {
    const auto h = spec["hypothesis"].get<std::string>();
    if (h.empty() || h.size() > 4096) return bad("hypothesis", "must be 1-4096 characters");
    if (!guarded)
      return bad("hypothesis", "a recorded hypothesis needs a guardrail signal: health_url, query or kernel_signal");
  }
  if (auto e = in_range(spec, "steady_state_sec", 0, 600)) return e;
  if (spec.contains("steady_state_sec") && !spec.contains("hypothesis"))
    return bad("steady_state_sec", "needs hypothesis (the steady state is measured for the record)");
  return std::nullopt;
}

// A syscall or resource experiment: the family's own fields are read by its
// spec reader (userspace/faults/<family>/experiment_spec.h, with the checks
// faultctl and faultd use); the rest are the common fields.
std::optional<ApiError> check_family_spec(const nlohmann::json& spec, std::span<const char* const> family) {
  nlohmann::json common = spec;
  for (const char* f : family) common.erase(f);
  if (auto e = check_fields(common, kCommonFields, "spec.")) return e;
  const auto kind = spec["kind"].get<std::string>();
  Status read = {};
  if (kind == "syscall") {
    if (auto s = syscall_spec_from_json(spec); !s) read = s.error();
  } else if (kind == "tcp") {
    if (auto t = tcp_spec_from_json(spec); !t) read = t.error();
  } else if (kind == "http") {
    if (auto h = http_spec_from_json(spec); !h) read = h.error();
  } else if (auto r = resource_spec_from_json(spec); !r) {
    read = r.error();
  }
  if (!read) {
    const std::string field = spec_error_field(read.error());
    if (field.empty()) return ApiError{400, "spec", read.error().message};
    return ApiError{400, field, read.error().message.substr(field.size() + 2)};
  }
  return check_guardrails(spec);
}

}  // namespace

std::optional<ApiError> check_experiment_spec(const nlohmann::json& spec) {
  if (spec.is_object() && spec.contains("kind") && spec["kind"].is_string()) {
    const auto k = spec["kind"].get<std::string>();
    if (k == "syscall") return check_family_spec(spec, syscall_spec_fields());
    if (k == "tcp") return check_family_spec(spec, tcp_spec_fields());
    if (k == "http") return check_family_spec(spec, http_spec_fields());
    if (is_resource_kind(k)) return check_family_spec(spec, resource_spec_fields());
  }
  if (auto e = check_fields(spec, kSpecFields, "spec.")) return e;
  const auto kind_text = spec["kind"].get<std::string>();
  const auto kind = kind_from_name(kind_text);
  if (!kind) {
    std::string names;
    for (const auto& n : kind_names()) names += (names.empty() ? "" : ", ") + n;
    return bad("kind", "'" + kind_text + "' is not a fault kind (" + names +
                           "; syscall; tcp; http; process, cpu, memory, disk)");
  }
  if (auto e = in_range(spec, "duration_sec", 1, kMaxDurationSec)) return e;
  if (auto e = in_range(spec, "delay_ms", 0, kMaxDelayMs)) return e;
  if (auto e = in_range(spec, "jitter_ms", 0, kMaxJitterMs)) return e;
  if (auto e = in_range(spec, "grace_sec", 0, kMaxDurationSec)) return e;
  if (spec.contains("percent")) {
    const double p = spec["percent"].get<double>();
    if (!std::isfinite(p) || p < 0 || p > 100) return bad("percent", "must be within 0-100");
  }
  if (spec.contains("dev")) {
    const auto dev = spec["dev"].get<std::string>();
    if (dev.empty() || dev.size() > 15 || dev.find('/') != std::string::npos)
      return bad("dev", "must be a device name of 1-15 characters");
  }
  if (spec.contains("target")) {
    if (auto p = parse_prefix(spec["target"].get<std::string>()); !p)
      return bad("target", "not an address or CIDR prefix: " + p.error().message);
  }
  const bool is_latency = *kind == FaultKind::Latency;
  if (is_latency && spec.value("delay_ms", int64_t{0}) == 0)
    return bad("delay_ms", "a latency fault needs delay_ms > 0");
  if (!is_latency && spec.contains("delay_ms")) return bad("delay_ms", "only a latency fault takes a delay");
  if (spec.contains("jitter_ms") && !spec.contains("delay_ms")) return bad("jitter_ms", "needs delay_ms");
  // A DNS fault is scoped by names (faultctl --domains), which a spec cannot carry yet.
  if (*kind == FaultKind::Dns) return bad("kind", "dns faults are not taken by the control plane yet");
  if (!spec.contains("target")) return bad("target", "is required: the address or prefix the fault acts on");
  // A packet fault ends in the kernel at its deadline: there is no revert for a
  // grace to wait on (that is a resource fault's reaper, not taken here yet).
  if (spec.contains("grace_sec")) return bad("grace_sec", "packet faults have no grace: they end at their deadline");
  if (spec.contains("netns")) {
    // faultctl --netns: a name under /run/netns or a path to an nsfs file.
    const auto ns = spec["netns"].get<std::string>();
    if (ns.empty() || ns.size() > 255 || ns.find("..") != std::string::npos ||
        ns.find_first_of(std::string("\0\n", 2)) != std::string::npos)
      return bad("netns", "must be a network namespace name or path of 1-255 characters");
  }
  return check_guardrails(spec);
}

}  // namespace faultline::cp
