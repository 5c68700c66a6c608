// The shared fields of an experiment: the table, the reader, the writer.
#include "userspace/faults/experiment_guardrails.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "base/units.h"
#include "userspace/faults/spec_fields.h"
#include "userspace/guardrails/http.h"

namespace faultline {
namespace {

using K = FieldKind;

constexpr ExperimentField kGuardrailFields[] = {
    {"interval", "interval", "interval_sec,interval_ms", K::Duration, "ms", FieldRange{100, 600'000},
     "time between health checks and Prometheus queries (default 2s and 5s)"},
    {"health_url",
     "health-url",
     "",
     K::Text,
     "",
     {},
     "http:// or https:// URL the guardrail GETs; healthy only on a 2xx"},
    {"health_ca",
     "health-ca",
     "",
     K::Text,
     "",
     {},
     "PEM file of the CA an https health URL is checked against, instead of the system trust store (in an "
     "experiment: an absolute path)"},
    {"health_max_latency", "health-max-latency", "health_max_latency_ms", K::Duration, "ms", FieldRange{1, 60'000},
     "slowest healthy answer, the whole body included (default 1s)"},
    {"prometheus_url", "prometheus-url", "", K::Text, "", {}, "Prometheus server the query guardrails ask"},
    {"prometheus_ca",
     "prometheus-ca",
     "",
     K::Text,
     "",
     {},
     "PEM file of the CA an https Prometheus URL is checked against (in an experiment: an absolute path)"},
    {"query",
     "query",
     "",
     K::Text,
     "",
     {},
     "guardrail on a PromQL instant query: one number, limited by abort-above/abort-below"},
    {"abort_above",
     "abort-above",
     "",
     K::Number,
     "",
     {},
     "upper limit of the guardrail named before it: kernel-signal (events per second, 0-1e9), query or "
     "slo-burn-rate"},
    {"abort_below", "abort-below", "", K::Number, "", {}, "lower limit of the query"},
    {"kernel_signal",
     "kernel-signal",
     "",
     K::Text,
     "",
     {},
     "guardrail on a kernel signal: tcp_retransmits or tcp_resets"},
    {"hypothesis",
     "hypothesis",
     "",
     K::Text,
     "",
     {},
     "what you expect to hold during the fault, 1-4096 characters (kept in the record)"},
    {"steady_state", "steady-state", "steady_state_sec", K::Duration, "ms", FieldRange{1'000, 600'000},
     "measure the guardrail signal this long before injecting and after (default 30s with --record; none in an "
     "experiment)"},
};

constexpr uint64_t kGuardrailSec = 1'000'000'000ULL;
constexpr uint64_t kGuardrailMs = 1'000'000ULL;
constexpr size_t kGuardrailMaxText = 4096;

bool is_http_url(const std::string& s) {
  return (s.rfind("http://", 0) == 0 && s.size() > 7) || (s.rfind("https://", 0) == 0 && s.size() > 8);
}

Result<std::string> url_field(const nlohmann::json& spec, const char* field) {
  auto url = spec_string(spec, field);
  if (!url) return url.error();
  if (!is_http_url(*url)) return spec_field_error(field, "must be an http:// or https:// URL");
  if (auto u = parse_http_url(*url); !u) return spec_field_error(field, u.error().message);
  return url;
}

// A CA file for an https URL: an absolute path (a spec is read by another
// process than the one that wrote it), read where the guardrail runs.
Result<std::string> ca_field(const nlohmann::json& spec, const char* field, const std::string& url) {
  auto ca = spec_string(spec, field);
  if (!ca) return ca.error();
  if (ca->empty() || ca->front() != '/') return spec_field_error(field, "must be an absolute path");
  if (url.rfind("https://", 0) != 0)
    return spec_field_error(field, "is for an https:// URL; " + url + " is plain http");
  return ca;
}

// The guardrail fields as a flag table for spec_error_from_flags().
std::span<const FlagField> guardrail_flag_fields() {
  static const std::vector<FlagField> table = flag_fields_of(kGuardrailFields);
  return table;
}

// The names of a row as spec spells it: the field, or a deprecated alias.
std::vector<std::string> spellings(const nlohmann::json& spec, const char* field) {
  const ExperimentField* f = find_field(kGuardrailFields, field);
  std::vector<std::string> out;
  if (spec.contains(field)) out.emplace_back(field);
  for (const auto& a : field_aliases(*f))
    if (spec.contains(a)) out.push_back(a);
  return out;
}

// The name spec gives field by (the field when absent), for the errors.
std::string spelled(const nlohmann::json& spec, const char* field) {
  auto names = spellings(spec, field);
  return names.empty() ? std::string(field) : names.front();
}

uint64_t alias_unit_ns(const std::string& alias) {
  return alias.size() > 4 && alias.compare(alias.size() - 4, 4, "_sec") == 0 ? kGuardrailSec : kGuardrailMs;
}

// A duration field: the flag's words ("250ms", "2m") under its name, or a
// whole number of seconds or milliseconds under a deprecated alias
// (interval_sec, interval_ms, health_max_latency_ms, steady_state_sec), in
// the same range. Absent: nullopt.
Result<std::optional<uint64_t>> duration_field(const nlohmann::json& spec, const char* field) {
  const ExperimentField* f = find_field(kGuardrailFields, field);
  const auto names = spellings(spec, field);
  if (names.empty()) return std::optional<uint64_t>{};
  const std::string& name = names.front();
  if (name == field) {
    const nlohmann::json& v = spec[field];
    if (!v.is_string())
      return spec_field_error(
          field, "must be a duration as --" + std::string(f->flag) + " takes it, a string (\"2s\", \"250ms\", \"1m\")");
    auto ns = parse_duration_field(*f, v.get<std::string>());
    if (!ns) return spec_error_from_flags(ns.error(), guardrail_flag_fields(), field);
    return std::optional<uint64_t>(*ns);
  }
  const uint64_t unit = alias_unit_ns(name);
  auto n = spec_uint(spec, name.c_str(), 0, UINT64_MAX / unit);
  if (!n) return n.error();
  // steady_state_sec 0 was "no steady state": still read so.
  if (*n == 0 && std::string(field) == "steady_state") return std::optional<uint64_t>(0);
  if (!in_range(*f, static_cast<double>(*n * unit) / 1e6))
    return spec_field_error(name, std::to_string(*n) + (unit == kGuardrailSec ? " s" : " ms") + ": must be within " +
                                      flag_range_text(*f) + " (" + name + " is deprecated: write \"" + field +
                                      "\": \"" + duration_field_text(*n * unit) + "\")");
  return std::optional<uint64_t>(*n * unit);
}

// The combinations: which field needs which, checked before any value is read
// so the first error names the field an operator has to add or remove.
Status check_combinations(const nlohmann::json& spec) {
  auto has = [&](const char* f) { return !spellings(spec, f).empty(); };
  for (const auto& f : kGuardrailFields) {
    const auto names = spellings(spec, f.field);
    if (names.size() > 1) return spec_field_error(names[1], "is " + names[0] + " in other words: give one of them");
  }
  if (has("interval") && !has("health_url") && !has("query"))
    return spec_field_error(spelled(spec, "interval"),
                            "sets how often health_url and query are read: give one of them");
  if (has("health_ca") && !has("health_url")) return spec_field_error("health_ca", "needs health_url");
  if (has("prometheus_ca") && !has("prometheus_url")) return spec_field_error("prometheus_ca", "needs prometheus_url");
  if (has("health_max_latency") && !has("health_url"))
    return spec_field_error(spelled(spec, "health_max_latency"), "needs health_url");
  if (has("query") != has("prometheus_url"))
    return spec_field_error(has("query") ? "prometheus_url" : "query",
                            "a Prometheus guardrail needs both prometheus_url and query");
  for (const char* limit : {"abort_above", "abort_below"})
    if (has(limit) && !has("query") && !has("kernel_signal"))
      return spec_field_error(limit, "needs a guardrail to read: query (with prometheus_url) or kernel_signal");
  if (has("abort_below") && has("kernel_signal") && !has("query"))
    return spec_field_error("abort_below", "a kernel signal guardrail takes abort_above only");
  if (has("query") && !has("abort_above") && !has("abort_below"))
    return spec_field_error("query", "needs abort_above or abort_below");
  const bool guarded = has("health_url") || has("query") || has("kernel_signal");
  if (has("hypothesis") && !guarded)
    return spec_field_error("hypothesis",
                            "a recorded hypothesis needs a guardrail signal: health_url, query or kernel_signal");
  if (has("steady_state") && !has("hypothesis"))
    return spec_field_error(spelled(spec, "steady_state"),
                            "needs hypothesis (the steady state is measured for the record)");
  return {};
}

Result<std::string> text_field(const nlohmann::json& spec, const char* field) {
  auto t = spec_string(spec, field);
  if (!t) return t.error();
  if (t->find_first_not_of(" \t\n") == std::string::npos || t->size() > kGuardrailMaxText)
    return spec_field_error(field, "must be 1-4096 characters");
  return t;
}

}  // namespace

std::span<const ExperimentField> guardrail_fields() { return kGuardrailFields; }

const ExperimentField& guardrail_field(const char* field) {
  const ExperimentField* f = find_field(kGuardrailFields, field);
  if (f == nullptr) std::abort();  // a name this program spells wrong
  return *f;
}

std::optional<uint64_t> guardrail_duration_ns(const nlohmann::json& spec, const char* field) {
  if (!spec.is_object() || find_field(kGuardrailFields, field) == nullptr) return std::nullopt;
  auto d = duration_field(spec, field);
  if (!d) return std::nullopt;
  return *d;
}

bool is_guardrail_field(const std::string& field) { return find_field_or_alias(kGuardrailFields, field) != nullptr; }

Result<ExperimentGuardrails> guardrails_from_json(const nlohmann::json& spec, const std::string& netns,
                                                  const std::string& record_dir) {
  if (!spec.is_object()) return input_error(EINVAL, "spec: not a JSON object");
  FL_TRY(check_combinations(spec));
  ExperimentGuardrails out;
  GuardrailOptions& g = out.guardrails;
  auto interval = duration_field(spec, "interval");
  if (!interval) return interval.error();
  if (spec.contains("health_url")) {
    HealthProbeConfig h;
    auto url = url_field(spec, "health_url");
    if (!url) return url.error();
    h.url = *url;
    h.netns = netns;
    if (spec.contains("health_ca")) {
      auto ca = ca_field(spec, "health_ca", *url);
      if (!ca) return ca.error();
      h.ca_file = *ca;
    }
    if (*interval) h.interval_ns = **interval;
    auto latency = duration_field(spec, "health_max_latency");
    if (!latency) return latency.error();
    if (*latency) h.max_latency_ns = **latency;
    g.health = h;
  }
  if (spec.contains("kernel_signal")) {
    KernelSignalConfig k;
    auto sig = spec_string(spec, "kernel_signal");
    if (!sig) return sig.error();
    if (!is_kernel_signal(*sig)) return spec_field_error("kernel_signal", "must be tcp_retransmits or tcp_resets");
    k.signal = *sig;
    if (!spec.contains("abort_above"))
      return spec_field_error("abort_above", "a kernel signal guardrail needs abort_above");
    auto above = spec_number(spec, "abort_above");
    if (!above) return above.error();
    if (!(*above >= 0) || *above > 1e9) return spec_field_error("abort_above", "must be within 0-1e9 per second");
    k.abort_above = *above;
    k.netns = netns;
    g.kernel_signal = k;
  }
  if (spec.contains("query")) {
    PrometheusGuardrailConfig q;
    auto url = url_field(spec, "prometheus_url");
    if (!url) return url.error();
    auto query = text_field(spec, "query");
    if (!query) return query.error();
    q.polling.endpoint.url = *url;
    if (spec.contains("prometheus_ca")) {
      auto ca = ca_field(spec, "prometheus_ca", *url);
      if (!ca) return ca.error();
      q.polling.endpoint.ca_file = *ca;
    }
    if (*interval) q.polling.interval_ns = **interval;
    q.query = *query;
    // With a kernel signal too, abort_above is the signal's (an experiment
    // has one pair of limits); the query then takes abort_below.
    if (spec.contains("abort_above") && !spec.contains("kernel_signal")) {
      auto a = spec_number(spec, "abort_above");
      if (!a) return a.error();
      q.abort_above = *a;
    }
    if (spec.contains("abort_below")) {
      auto b = spec_number(spec, "abort_below");
      if (!b) return b.error();
      q.abort_below = *b;
    }
    if (!q.abort_above && !q.abort_below) return spec_field_error("query", "needs abort_above or abort_below");
    if (q.abort_above && q.abort_below && !(*q.abort_below < *q.abort_above))
      return spec_field_error("abort_below", "must be below abort_above, or every value is a breach");
    g.prometheus = q;
  }
  if (spec.contains("hypothesis")) {
    auto h = text_field(spec, "hypothesis");
    if (!h) return h.error();
    RecordOptions r;
    r.hypothesis = *h;
    r.dir = record_dir;
    auto steady = duration_field(spec, "steady_state");
    if (!steady) return steady.error();
    if (*steady) r.steady_state_ns = **steady;
    r.command_line = "faultcp experiment (" + spec.dump() + ")";
    out.record = r;
  }
  return out;
}

Result<uint64_t> whole_units(uint64_t ns, uint64_t unit_ns, const std::string& flag) {
  if (ns % unit_ns != 0)
    return input_error(EINVAL, flag + " " + format_duration(ns) + ": an experiment takes whole " +
                                   (unit_ns == kGuardrailMs ? "milliseconds" : "seconds"));
  return ns / unit_ns;
}

Status guardrails_to_json(const GuardrailOptions& g, const std::optional<RecordOptions>& record, nlohmann::json& spec) {
  auto refuse = [](const std::string& flag) {
    return input_error(EINVAL, flag + " cannot be carried by an experiment: give it to `faultctl run` on the host");
  };
  if (g.burn_rate) return refuse("--slo-burn-rate");
  if (g.health) {
    spec["health_url"] = g.health->url;
    if (!g.health->ca_file.empty()) {
      if (g.health->ca_file.front() != '/')
        return input_error(EINVAL, "--health-ca: an experiment takes an absolute path");
      spec["health_ca"] = g.health->ca_file;
    }
    if (g.health->max_latency_ns != HealthProbeConfig{}.max_latency_ns)
      spec["health_max_latency"] = duration_field_text(g.health->max_latency_ns);
  }
  if (g.prometheus) {
    const PrometheusPolling& p = g.prometheus->polling;
    if (!p.endpoint.ca_file.empty()) {
      if (p.endpoint.ca_file.front() != '/')
        return input_error(EINVAL, "--prometheus-ca: an experiment takes an absolute path");
      spec["prometheus_ca"] = p.endpoint.ca_file;
    }
    if (p.query_errors != PrometheusPolling{}.query_errors) return refuse("--query-errors");
    spec["prometheus_url"] = p.endpoint.url;
    spec["query"] = g.prometheus->query;
    if (g.prometheus->abort_above) spec["abort_above"] = *g.prometheus->abort_above;
    if (g.prometheus->abort_below) spec["abort_below"] = *g.prometheus->abort_below;
  }
  // One interval for the health probe and the query; each left at its
  // own default (2 s, 5 s) when it is absent.
  std::optional<uint64_t> interval;
  const uint64_t health_default = HealthProbeConfig{}.interval_ns, query_default = PrometheusPolling{}.interval_ns;
  if (g.health && g.prometheus) {
    const uint64_t h = g.health->interval_ns, q = g.prometheus->polling.interval_ns;
    if (h == q)
      interval = h;
    else if (h != health_default || q != query_default)
      return input_error(EINVAL,
                         "--prometheus-interval: an experiment has one interval for the health probe and the "
                         "query; give --interval alone");
  } else if (g.health && g.health->interval_ns != health_default) {
    interval = g.health->interval_ns;
  } else if (g.prometheus && g.prometheus->polling.interval_ns != query_default) {
    interval = g.prometheus->polling.interval_ns;
  }
  if (interval) spec["interval"] = duration_field_text(*interval);
  if (g.kernel_signal) {
    if (g.prometheus && g.prometheus->abort_above)
      return input_error(EINVAL, "--abort-above: an experiment has one; give it to --kernel-signal or to --query");
    const KernelSignalConfig defaults;
    if (g.kernel_signal->window_ns != defaults.window_ns) return refuse("--signal-window");
    if (g.kernel_signal->source != defaults.source) return refuse("--signal-source");
    spec["kernel_signal"] = g.kernel_signal->signal;
    spec["abort_above"] = g.kernel_signal->abort_above;
  }
  if (record) {
    if (!record->dir.empty()) return refuse("--record");
    if (record->slo) return refuse("--slo");
    if (!record->hypothesis.empty()) spec["hypothesis"] = record->hypothesis;
    if (record->steady_state_ns) spec["steady_state"] = duration_field_text(record->steady_state_ns);
  }
  return {};
}

}  // namespace faultline
