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

using K = FieldKind;
constexpr double kStreamSec = 1e-9;
constexpr double kStreamMs = 1e-6;

// The fields of a tcp experiment, one row per `faultctl run tcp` flag it carries.
constexpr ExperimentField kTcpFields[] = {
    {"target",
     "target",
     "",
     K::Text,
     "",
     {},
     "HOST:PORT whose TCP connections are intercepted (HOST: address or CIDR prefix, or a name faultctl resolves; "
     "PORT: one or A-B)"},
    {"toxic",
     "toxic",
     "",
     K::List,
     "",
     {},
     "TYPE=VALUE[,KEY=VALUE...]: latency, bandwidth, slow_close, timeout, reset_peer, slicer, limit_data, noop "
     "(repeatable; see docs/proxy.md)"},
    {"direction",
     "direction",
     "",
     K::Text,
     "",
     {},
     "the toxics' default stream: downstream (server to client, default) or upstream"},
    {"toxicity", "toxicity", "", K::Number, "", FieldRange{0, 1},
     "the toxics' default share of connections (default 1)"},
    {"cgroup", "cgroup", "", K::Text, "", {}, "scope: an existing cgroup v2 (default: host-wide)"},
    {"drain_ms", "drain", "", K::Whole, "ms", FieldRange{0, StreamCaps::kMaxDrainNs* kStreamMs},
     "after the end, how long open connections may finish clean before they are closed (default 5s)"},
    {"duration_sec", "duration", "", K::Whole, "s",
     FieldRange{StreamCaps::kMinDurationNs * kStreamSec, StreamCaps::kMaxDurationNs* kStreamSec},
     "how long (required)"},
};

// The fields of an http experiment, one row per `faultctl run http` flag it carries.
constexpr ExperimentField kHttpFields[] = {
    {"target",
     "target",
     "",
     K::Text,
     "",
     {},
     "HOST:PORT of the HTTP service (HOST: address or CIDR prefix, or a name faultctl resolves)"},
    {"method", "method", "", K::Text, "", {}, "match: only this method (GET, POST, ...)"},
    {"path", "path", "", K::Text, "", {}, "match: a path prefix (whole segments) or a glob (* ? [)"},
    {"host", "host", "", K::Text, "", {}, "match: the Host header (default: any)"},
    {"header_equals",
     "header-equals",
     "",
     K::List,
     "",
     {},
     "match: a request header equal to a value, NAME=VALUE (repeatable)"},
    {"header_contains",
     "header-contains",
     "",
     K::List,
     "",
     {},
     "match: a request header containing a value, NAME=VALUE (repeatable)"},
    {"status", "status", "", K::Whole, "", FieldRange{200, 599}, "answer this final status instead of forwarding"},
    {"body", "body", "", K::Text, "", {}, "--status: the body"},
    {"content_type", "content-type", "", K::Text, "", {}, "--status: the body's type (default text/plain)"},
    {"delay_ms", "delay", "", K::Whole, "ms", FieldRange{1, StreamCaps::kMaxHttpDelayNs* kStreamMs},
     "hold each request this long"},
    {"delay_at", "delay-at", "", K::Text, "", {}, "--delay: request (before it is forwarded, default) or response"},
    {"reset", "reset", "", K::Switch, "", {}, "reset the connection (RST) mid-request"},
    {"truncate", "truncate", "", K::Whole, "", FieldRange{0, 1099511627776.0},
     "forward, then cut the response body after N bytes and close"},
    {"abort_stream", "abort-stream", "", K::Whole, "", FieldRange{0, 1'000'000},
     "SSE: forward N events, then cut the stream"},
    {"llm",
     "llm",
     "",
     K::Text,
     "",
     {},
     "a model provider's failure: overloaded, rate-limit, server-error, bad-gateway, timeout, stream-cut"},
    {"llm_provider",
     "llm-provider",
     "",
     K::Text,
     "",
     {},
     "--llm: anthropic or openai (default: from the host, headers and path)"},
    {"retry_after", "retry-after", "", K::Whole, "", FieldRange{0, 3600},
     "--llm rate-limit: the retry-after seconds (default 1)"},
    {"percent", "percent", "", K::Number, "%", FieldRange{0, 100}, "share of matching requests faulted (default 100)"},
    {"attempts", "attempts", "", K::Whole, "", FieldRange{1, 100},
     "fault only the first N attempts of a request (the SDKs' x-stainless-retry-count)"},
    {"tls",
     "tls",
     "",
     K::Switch,
     "",
     {},
     "the target speaks TLS, not terminated (implied by port 443): faults match the SNI, --delay and --reset only"},
    {"terminate_tls",
     "terminate-tls",
     "",
     K::Switch,
     "",
     {},
     "end the clients' TLS with a leaf of the local CA (faultctl ca) and re-encrypt to the verified upstream: every "
     "fault applies; a command is told to trust the CA"},
    {"upstream_ca",
     "upstream-ca",
     "",
     K::Text,
     "",
     {},
     "--terminate-tls: a PEM file of roots the upstream may also chain to"},
    {"cgroup", "cgroup", "", K::Text, "", {}, "scope: an existing cgroup v2 (default: host-wide)"},
    {"drain_ms", "drain", "", K::Whole, "ms", FieldRange{0, StreamCaps::kMaxDrainNs* kStreamMs},
     "after the end, how long open connections may finish clean before they are closed (default 5s)"},
    {"duration_sec", "duration", "", K::Whole, "s",
     FieldRange{StreamCaps::kMinDurationNs * kStreamSec, StreamCaps::kMaxDurationNs* kStreamSec},
     "how long (required)"},
};

// The http fields read by parse_stream_run_flags()'s part of the reader, not
// given to http_fault_from_flags().
bool is_stream_run_field(std::string_view field) {
  return field == "target" || field == "cgroup" || field == "drain_ms" || field == "duration_sec";
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
  auto d = spec_duration_ns(spec);
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

std::span<const ExperimentField> tcp_experiment_fields() { return kTcpFields; }

Status check_toxicity(double v, const std::string& text) {
  const ExperimentField& f = *find_field(kTcpFields, "toxicity");
  if (!in_range(f, v))
    return input_error(EINVAL, "--toxicity " + text + ": a share of connections from " +
                                   std::to_string(static_cast<int>(f.range->lo)) + " to " +
                                   std::to_string(static_cast<int>(f.range->hi)) + " (e.g. 0.3)");
  return {};
}
std::span<const FlagField> tcp_flag_fields() {
  static const std::vector<FlagField> table = flag_fields_of(kTcpFields);
  return table;
}

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
    if (auto ok = check_toxicity(*x, spec["toxicity"].dump()); !ok)
      return spec_error_from_flags(ok.error(), tcp_flag_fields(), "toxicity");
    toxicity = *x;
  }
  constexpr const char* kToxicExample = "[\"latency=200ms,jitter=20ms\"]";
  if (!spec.contains("toxic")) return spec_field_error("toxic", std::string("is required, e.g. ") + kToxicExample);
  auto texts = spec_strings(spec, "toxic", "TYPE=VALUE[,KEY=VALUE...]", kToxicExample);
  if (!texts) return texts.error();
  auto toxics = parse_toxics(*texts, stream, toxicity);
  if (!toxics) return spec_error_from_flags(toxics.error(), tcp_flag_fields(), "toxic");
  s.toxics = std::move(*toxics);
  FL_TRY(stream_run_fields(spec, s));
  if (auto v = validate(s); !v) return spec_error_from_flags(v.error(), tcp_flag_fields(), "kind");
  return s;
}

std::span<const ExperimentField> http_experiment_fields() { return kHttpFields; }
std::span<const FlagField> http_flag_fields() {
  static const std::vector<FlagField> table = flag_fields_of(kHttpFields);
  return table;
}

Result<TcpFaultSpec> http_spec_from_json(const nlohmann::json& spec) {
  auto started = stream_spec_with_target(spec, "\"10.0.0.5:8080\"");
  if (!started) return started.error();
  TcpFaultSpec s = std::move(*started);
  // Each field as its flag's text, for the checks of `faultctl run http`.
  HttpFlagValues v;
  for (const auto& f : kHttpFields) {
    const char* field = f.field;
    const char* flag = f.flag;
    if (is_stream_run_field(field) || !spec.contains(field)) continue;
    const nlohmann::json& x = spec[field];
    if (f.kind == K::Text) {
      auto t = spec_string(spec, field);
      if (!t) return t.error();
      v.given[flag] = {*t};
    } else if (f.kind == K::Whole) {
      auto n = spec_uint(spec, field, 0, UINT64_MAX);
      if (!n) return n.error();
      v.given[flag] = {std::string(f.unit) == "ms" ? std::to_string(*n) + "ms" : std::to_string(*n)};
    } else if (f.kind == K::Number) {
      auto n = spec_number(spec, field);
      if (!n) return n.error();
      v.given[flag] = {x.dump()};
    } else if (f.kind == K::Switch) {
      auto b = spec_bool(spec, field);
      if (!b) return b.error();
      if (*b) v.given[flag] = {""};
    } else {
      auto texts = spec_strings(spec, field, "NAME=VALUE", "[\"X-Tenant=blue\"]");
      if (!texts) return texts.error();
      v.given[flag] = std::move(*texts);
    }
  }
  if (auto h = http_fault_from_flags(v, s); !h) return spec_error_from_flags(h.error(), http_flag_fields(), "kind");
  FL_TRY(stream_run_fields(spec, s));
  if (auto ok = validate(s); !ok) return spec_error_from_flags(ok.error(), http_flag_fields(), "kind");
  return s;
}

}  // namespace faultline
