// "kind": "tcp" and "kind": "http" -> TcpFaultSpec, checked with the CLI's
// parse_toxics(), http_fault_from_flags() and validate().
#include "userspace/faults/stream/experiment.h"

#include <cerrno>
#include <string_view>

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

constexpr const char* kHttpFields[] = {
    "target",       "method",   "path",     "host",  "header_equals", "header_contains", "status", "body",
    "content_type", "delay_ms", "delay_at", "reset", "truncate",      "abort_stream",    "llm",    "llm_provider",
    "retry_after",  "percent",  "attempts", "tls",   "terminate_tls", "upstream_ca",     "cgroup", "drain_ms"};

// The fields that are `faultctl run http` flags (besides target, cgroup, drain_ms).
struct HttpFieldFlag {
  const char* field;
  const char* flag;
};
constexpr HttpFieldFlag kHttpWords[] = {
    {"method", "method"},
    {"path", "path"},
    {"host", "host"},
    {"header_equals", "header-equals"},
    {"header_contains", "header-contains"},
    {"status", "status"},
    {"body", "body"},
    {"content_type", "content-type"},
    {"delay_ms", "delay"},
    {"delay_at", "delay-at"},
    {"reset", "reset"},
    {"truncate", "truncate"},
    {"abort_stream", "abort-stream"},
    {"llm", "llm"},
    {"llm_provider", "llm-provider"},
    {"retry_after", "retry-after"},
    {"percent", "percent"},
    {"attempts", "attempts"},
    {"tls", "tls"},
    {"terminate_tls", "terminate-tls"},
    {"upstream_ca", "upstream-ca"},
};

// The flags the checks name, and their fields.
constexpr FlagField kHttpFlagFields[] = {
    {"duration", "duration_sec"},
    {"target", "target"},
    {"method", "method"},
    {"path", "path"},
    {"host", "host"},
    {"header-equals", "header_equals"},
    {"header-contains", "header_contains"},
    {"status", "status"},
    {"body", "body"},
    {"content-type", "content_type"},
    {"delay", "delay_ms"},
    {"delay-at", "delay_at"},
    {"reset", "reset"},
    {"truncate", "truncate"},
    {"abort-stream", "abort_stream"},
    {"llm", "llm"},
    {"llm-provider", "llm_provider"},
    {"retry-after", "retry_after"},
    {"percent", "percent"},
    {"attempts", "attempts"},
    {"tls", "tls"},
    {"terminate-tls", "terminate_tls"},
    {"upstream-ca", "upstream_ca"},
    {"cgroup", "cgroup"},
    {"drain", "drain_ms"},
};

// How a field of kHttpWords is written: a string, a whole number, a number, a
// boolean (a flag without a value), or an array of strings (a repeatable flag).
enum class HttpWord { text, whole, number, flag, list };
HttpWord http_word_kind(std::string_view field) {
  for (const char* f : {"status", "delay_ms", "truncate", "abort_stream", "retry_after", "attempts"})
    if (field == f) return HttpWord::whole;
  if (field == "percent") return HttpWord::number;
  for (const char* f : {"reset", "tls", "terminate_tls"})
    if (field == f) return HttpWord::flag;
  if (field == "header_equals" || field == "header_contains") return HttpWord::list;
  return HttpWord::text;
}

// The HOST of HOST:PORT ("[::1]:443" -> "::1").
std::string tcp_host_of(const std::string& t) {
  if (!t.empty() && t.front() == '[') return t.substr(1, t.find(']') == std::string::npos ? 0 : t.find(']') - 1);
  const auto colon = t.rfind(':');
  return colon == std::string::npos ? t : t.substr(0, colon);
}

// The start of both stream kinds' readers: a JSON object whose spec.target is
// HOST:PORT with an address or CIDR prefix as host, into a spec with that target.
Result<TcpFaultSpec> stream_spec_with_target(const nlohmann::json& spec, const std::string& example) {
  if (!spec.is_object()) return input_error(EINVAL, "spec: not a JSON object");
  if (!spec.contains("target")) return spec_field_error("target", "is required (HOST:PORT, e.g. " + example + ")");
  auto target = spec_string(spec, "target");
  if (!target) return target.error();
  if (!parse_prefix(tcp_host_of(*target)))
    return spec_field_error("target", "'" + *target +
                                          "': the host must be an address or CIDR prefix (a name would be resolved "
                                          "by whoever reads the spec, not where the fault runs)");
  auto t = parse_tcp_target(*target);
  if (!t) return spec_field_error("target", t.error().message);
  TcpFaultSpec s;
  s.target = std::move(*t);
  return s;
}

// duration_sec, cgroup and drain_ms (the flags parse_stream_run_flags reads).
Status stream_run_fields(const nlohmann::json& spec, TcpFaultSpec& s) {
  auto d = spec_duration_ns(spec, 1, StreamCaps::kMaxDurationNs);
  if (!d) return d.error();
  s.duration_ns = *d;
  FL_TRY(spec_optional_path(spec, "cgroup", s.cgroup));
  if (spec.contains("drain_ms")) {
    auto dr = spec_uint(spec, "drain_ms", 0, UINT64_MAX / 1'000'000ULL);
    if (!dr) return dr.error();
    s.drain_ns = *dr * 1'000'000ULL;
  }
  return {};
}

}  // namespace

std::span<const char* const> tcp_spec_fields() { return kTcpFields; }
std::span<const FlagField> tcp_flag_fields() { return kTcpFlagFields; }

Result<TcpFaultSpec> tcp_spec_from_json(const nlohmann::json& spec) {
  auto started = stream_spec_with_target(spec, "\"10.0.0.5:5432\"");
  if (!started) return started.error();
  TcpFaultSpec s = std::move(*started);
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
  constexpr const char* kToxicExample = "[\"latency=200ms,jitter=20ms\"]";
  if (!spec.contains("toxic")) return spec_field_error("toxic", std::string("is required, e.g. ") + kToxicExample);
  auto texts = spec_strings(spec, "toxic", "TYPE=VALUE[,KEY=VALUE...]", kToxicExample);
  if (!texts) return texts.error();
  auto toxics = parse_toxics(*texts, stream, toxicity);
  if (!toxics) return spec_error_from_flags(toxics.error(), kTcpFlagFields, "toxic");
  s.toxics = std::move(*toxics);
  FL_TRY(stream_run_fields(spec, s));
  if (auto v = validate(s); !v) return spec_error_from_flags(v.error(), kTcpFlagFields, "kind");
  return s;
}

std::span<const char* const> http_spec_fields() { return kHttpFields; }
std::span<const FlagField> http_flag_fields() { return kHttpFlagFields; }

Result<TcpFaultSpec> http_spec_from_json(const nlohmann::json& spec) {
  auto started = stream_spec_with_target(spec, "\"10.0.0.5:8080\"");
  if (!started) return started.error();
  TcpFaultSpec s = std::move(*started);
  // Each field as its flag's text, for the checks of `faultctl run http`.
  HttpFlagValues v;
  for (const auto& [field, flag] : kHttpWords) {
    if (!spec.contains(field)) continue;
    const nlohmann::json& x = spec[field];
    const auto kind = http_word_kind(field);
    if (kind == HttpWord::text) {
      auto t = spec_string(spec, field);
      if (!t) return t.error();
      v.given[flag] = {*t};
    } else if (kind == HttpWord::whole) {
      auto n = spec_uint(spec, field, 0, UINT64_MAX);
      if (!n) return n.error();
      v.given[flag] = {std::string(field) == "delay_ms" ? std::to_string(*n) + "ms" : std::to_string(*n)};
    } else if (kind == HttpWord::number) {
      auto n = spec_number(spec, field);
      if (!n) return n.error();
      v.given[flag] = {x.dump()};
    } else if (kind == HttpWord::flag) {
      auto b = spec_bool(spec, field);
      if (!b) return b.error();
      if (*b) v.given[flag] = {""};
    } else {
      auto texts = spec_strings(spec, field, "NAME=VALUE", "[\"X-Tenant=blue\"]");
      if (!texts) return texts.error();
      v.given[flag] = std::move(*texts);
    }
  }
  if (auto h = http_fault_from_flags(v, s); !h) return spec_error_from_flags(h.error(), kHttpFlagFields, "kind");
  FL_TRY(stream_run_fields(spec, s));
  if (auto ok = validate(s); !ok) return spec_error_from_flags(ok.error(), kHttpFlagFields, "kind");
  return s;
}

}  // namespace faultline
