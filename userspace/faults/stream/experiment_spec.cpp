// "kind": "tcp" -> TcpFaultSpec, checked with the CLI's parse_toxics() and validate().
#include "userspace/faults/stream/experiment_spec.h"

#include <cerrno>

#include "userspace/faults/spec_fields.h"
#include "userspace/faults/stream/spec_check.h"
#include "userspace/net/address.h"

namespace faultline {
namespace {

constexpr const char* kTcpFields[] = {"target", "toxic", "direction", "toxicity", "cgroup", "drain_ms"};

constexpr FlagField kTcpFlagFields[] = {
    {"duration", "duration_sec"}, {"target", "target"}, {"toxic", "toxic"},    {"direction", "direction"},
    {"toxicity", "toxicity"},     {"cgroup", "cgroup"}, {"drain", "drain_ms"},
};

// The HOST of HOST:PORT ("[::1]:443" -> "::1").
std::string tcp_host_of(const std::string& t) {
  if (!t.empty() && t.front() == '[') return t.substr(1, t.find(']') == std::string::npos ? 0 : t.find(']') - 1);
  const auto colon = t.rfind(':');
  return colon == std::string::npos ? t : t.substr(0, colon);
}

}  // namespace

std::span<const char* const> tcp_spec_fields() { return kTcpFields; }

Result<TcpFaultSpec> tcp_spec_from_json(const nlohmann::json& spec) {
  if (!spec.is_object()) return input_error(EINVAL, "spec: not a JSON object");
  TcpFaultSpec s;
  if (!spec.contains("target")) return spec_field_error("target", "is required (HOST:PORT, e.g. \"10.0.0.5:5432\")");
  auto target = spec_string(spec, "target");
  if (!target) return target.error();
  if (!parse_prefix(tcp_host_of(*target)))
    return spec_field_error("target", "'" + *target +
                                          "': the host must be an address or CIDR prefix (a name would be resolved "
                                          "by whoever reads the spec, not where the fault runs)");
  auto t = parse_tcp_target(*target);
  if (!t) return spec_field_error("target", t.error().message);
  s.target = std::move(*t);
  Stream stream = Stream::downstream;
  if (spec.contains("direction")) {
    auto d = spec_string(spec, "direction");
    if (!d) return d.error();
    if (*d != "upstream" && *d != "downstream")
      return spec_field_error("direction", *d + ": upstream (client to server) or downstream (server to client)");
    stream = *d == "upstream" ? Stream::upstream : Stream::downstream;
  }
  double toxicity = 1.0;
  if (spec.contains("toxicity")) {
    auto x = spec_number(spec, "toxicity");
    if (!x) return x.error();
    if (*x < 0 || *x > 1) return spec_field_error("toxicity", "a share of connections from 0 to 1 (e.g. 0.3)");
    toxicity = *x;
  }
  if (!spec.contains("toxic") || !spec["toxic"].is_array() || spec["toxic"].empty())
    return spec_field_error("toxic", "is required: an array of --toxic texts, e.g. [\"latency=200ms,jitter=20ms\"]");
  std::vector<std::string> texts;
  for (size_t i = 0; i < spec["toxic"].size(); ++i) {
    if (!spec["toxic"][i].is_string())
      return spec_field_error("toxic[" + std::to_string(i) + "]", "must be a string (TYPE=VALUE[,KEY=VALUE...])");
    texts.push_back(spec["toxic"][i].get<std::string>());
  }
  auto toxics = parse_toxics(texts, stream, toxicity);
  if (!toxics) return spec_error_from_flags(toxics.error(), kTcpFlagFields, "toxic");
  s.toxics = std::move(*toxics);
  auto d = spec_duration_ns(spec, 1, StreamCaps::kMaxDurationNs);
  if (!d) return d.error();
  s.duration_ns = *d;
  FL_TRY(spec_optional_path(spec, "cgroup", s.cgroup));
  if (spec.contains("drain_ms")) {
    auto dr = spec_uint(spec, "drain_ms", 0, UINT64_MAX / 1'000'000ULL);
    if (!dr) return dr.error();
    s.drain_ns = *dr * 1'000'000ULL;
  }
  if (auto v = validate(s); !v) return spec_error_from_flags(v.error(), kTcpFlagFields, "kind");
  return s;
}

}  // namespace faultline
