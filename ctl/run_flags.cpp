// The shared run flags, and run_fault(): guardrails, the guarded run, the exit code.
#include "ctl/run_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "base/units.h"
#include "ctl/flag_error.h"
#include "userspace/faults/experiment_guardrails.h"
#include "userspace/guardrails/http.h"
#include "userspace/orchestration/facts.h"
#include "userspace/orchestration/service.h"
#include "userspace/orchestration/watchdog.h"
#include "userspace/run/guarded_run.h"

namespace faultline {
namespace {

// --interval and --prometheus-interval: the interval row's range (100ms-10m),
// unset when not given.
Result<std::optional<uint64_t>> interval_flag(const cxxopts::ParseResult& r, const char* flag) {
  if (!r.count(flag)) return std::optional<uint64_t>{};
  auto d = parse_duration_field(guardrail_field("interval"), r[flag].as<std::string>(), flag);
  if (!d) return d.error();
  return std::optional<uint64_t>(*d);
}

Result<double> parse_number(const GuardrailLimit& l) {
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(l.value, &used);
    if (used != l.value.size()) throw std::invalid_argument(l.value);
  } catch (...) {
    return bad(l.flag + " '" + l.value + "': not a number");
  }
  if (!std::isfinite(v)) return bad(l.flag + " '" + l.value + "': not a finite number");
  return v;
}

}  // namespace

Result<GuardrailLimits> bind_limits(const cxxopts::ParseResult& r) {
  GuardrailLimits out;
  auto owner = [&](const std::string& key) -> std::vector<GuardrailLimit>* {
    if (key == "kernel-signal") return &out.kernel_signal;
    if (key == "query") return &out.query;
    if (key == "slo-burn-rate") return &out.burn_rate;
    return nullptr;
  };
  std::vector<GuardrailLimit>* current = nullptr;
  std::vector<std::vector<GuardrailLimit>*> named;
  std::vector<GuardrailLimit> before;  // limits written before any guardrail
  for (const auto& kv : r.arguments()) {
    if (auto* o = owner(kv.key())) {
      current = o;
      if (std::find(named.begin(), named.end(), o) == named.end()) named.push_back(o);
    } else if (kv.key() == "abort-above" || kv.key() == "abort-below") {
      GuardrailLimit l{"--" + kv.key(), kv.value()};
      (current ? *current : before).push_back(l);
    }
  }
  if (before.empty()) return out;
  if (named.empty())
    return bad(before[0].flag + " limits a guardrail: give --kernel-signal, --query or --slo-burn-rate too");
  if (named.size() > 1)
    return bad(before[0].flag + " " + before[0].value +
               " comes before the guardrail it limits: with several guardrails, write each limit after its own "
               "(--kernel-signal S --abort-above N --query Q --abort-below X)");
  named[0]->insert(named[0]->begin(), before.begin(), before.end());
  return out;
}

void add_run_options(cxxopts::Options& o) {
  // The flags an experiment carries take their help and range from their rows
  // (userspace/faults/experiment_guardrails.cpp); the others are the host's.
  auto row = [](const char* flag) { return flag_help(guardrail_fields(), flag); };
  // clang-format off
  o.add_options("guardrail")
      ("health-url", row("health-url"), cxxopts::value<std::string>())
      ("health-ca", row("health-ca"), cxxopts::value<std::string>())
      ("health-max-latency", row("health-max-latency"), cxxopts::value<std::string>())
      ("interval", row("interval"), cxxopts::value<std::string>())
      ("kernel-signal", row("kernel-signal"), cxxopts::value<std::string>())
      ("signal-window", "kernel-signal averaging window (default 3s)", cxxopts::value<std::string>())
      ("signal-source", "where the kernel signal counts: auto|tp_btf|procfs (default auto)", cxxopts::value<std::string>())
      ("prometheus-url", row("prometheus-url"), cxxopts::value<std::string>())
      ("prometheus-ca", row("prometheus-ca"), cxxopts::value<std::string>())
      ("prometheus-interval", "time between Prometheus queries (default --interval, else 5s; " + flag_range_text(guardrail_field("interval")) + ")", cxxopts::value<std::string>())
      ("query", row("query"), cxxopts::value<std::string>())
      ("query-errors", "failed Prometheus queries tolerated in a row; one more aborts (default 3)", cxxopts::value<std::string>())
      ("slo-burn-rate", "guardrail on an SLO's burn rate: PromQL with {window} (or given twice: fast, slow)", cxxopts::value<std::string>())
      ("slo-target", "the SLO in percent (99.9): --slo-burn-rate is then an error ratio", cxxopts::value<std::string>())
      ("burn-windows", "the fast and the slow window for {window} (default 5m,1h)", cxxopts::value<std::string>())
      ("slo-watchdog", "guardrail on a service's slo:burn_rate5m{service=NAME}, armed only by its preflight", cxxopts::value<std::string>())
      ("abort-burn-rate-5m", "the --slo-watchdog's limit: a 5m burn rate, clamped to 2-10", cxxopts::value<std::string>())
      ("abort-above", row("abort-above"), cxxopts::value<std::string>())
      ("abort-below", row("abort-below"), cxxopts::value<std::string>());
  o.add_options("experiment record")
      ("hypothesis", row("hypothesis"), cxxopts::value<std::string>())
      ("steady-state", row("steady-state"), cxxopts::value<std::string>())
      ("record", "new folder for the record: hypothesis, spec, steady state, time series, verdict", cxxopts::value<std::string>())
      ("slo", "the hypothesis threshold: p99<300ms or success>99.9%", cxxopts::value<std::string>());
  o.add_options("output")
      ("dry-run", "validate and print the plan; change nothing")
      ("json", "JSON lines on stdout")
      ("redact-pattern", "also redact what this regex matches, in output and records (repeatable)", cxxopts::value<std::vector<std::string>>())
      ("no-redact", "keep secrets (URL credentials, tokens, keys) in output and records; recorded as such");
  // clang-format on
}

Result<RunFlags> parse_run_flags(const cxxopts::ParseResult& r, const std::string& probe_netns, uint64_t duration_ns,
                                 const std::vector<std::string>& args) {
  RunFlags f;
  auto limits = bind_limits(r);
  if (!limits) return limits.error();
  if (r.count("interval") && !r.count("health-url") && !r.count("prometheus-url"))
    return bad(
        "--interval sets how often the health probe and Prometheus are asked; give --health-url or "
        "--prometheus-url too");
  auto health = parse_health_flags(r, probe_netns);
  if (!health) return health.error();
  f.guardrails.health = *health;
  auto ksig = parse_kernel_signal_flags(r, *limits);
  if (!ksig) return ksig.error();
  f.guardrails.kernel_signal = *ksig;
  if (f.guardrails.kernel_signal) f.guardrails.kernel_signal->netns = probe_netns;
  FL_TRY(parse_prometheus_flags(r, *limits, f.guardrails));
  auto watchdog = parse_slo_watchdog_flags(r);
  if (!watchdog) return watchdog.error();
  f.slo_watchdog = *watchdog;
  f.dry_run = r.count("dry-run") > 0;
  f.json = r.count("json") > 0;
  {
    std::vector<std::string> patterns;
    if (r.count("redact-pattern")) patterns = r["redact-pattern"].as<std::vector<std::string>>();
    if (r.count("no-redact") && !patterns.empty()) return bad("--redact-pattern and --no-redact contradict each other");
    auto red = Redactor::make(patterns, r.count("no-redact") == 0);
    if (!red) return red.error();
    f.redactor = std::move(*red);
  }
  // A record reads every guardrail at the shortest interval among them.
  uint64_t record_interval = f.guardrails.record_interval_ns();
  if (f.slo_watchdog)
    record_interval =
        f.guardrails.any() ? std::min(record_interval, f.slo_watchdog->interval_ns) : f.slo_watchdog->interval_ns;
  auto rec = parse_record_flags(r, f.guardrails.health.has_value(), f.guardrails.any() || f.slo_watchdog.has_value(),
                                duration_ns, record_interval, args);
  if (!rec) return rec.error();
  f.record = *rec;
  if (f.record) f.record->redactor = f.redactor;
  return f;
}

int run_fault(RunnableFault& fault, const RunFlags& flags, const std::string& who) {
  return run_fault(fault, flags, who, RunIo{std::cout, std::cerr});
}

int run_fault(RunnableFault& fault, const RunFlags& flags, const std::string& who, const RunIo& io) {
  auto guardrails = make_guardrails(flags.guardrails, fault.netns_inode());
  if (!guardrails) {
    io.err << who << ": " << guardrails.error().describe() << "\n";
    return guardrails.error().bad_input ? kExitBadInput : kExitFailure;
  }
  SloWatchdog* watchdog = nullptr;
  if (flags.slo_watchdog) {
    const auto& w = *flags.slo_watchdog;
    // Each query answered within the interval, at most 5 s: a slower answer is silence.
    auto prom = prometheus_query(w.prometheus, std::min<uint64_t>(w.interval_ns, 5'000'000'000ULL));
    if (!prom) {
      io.err << who << ": --prometheus-url " << prom.error().describe() << "\n";
      return prom.error().bad_input ? kExitBadInput : kExitFailure;
    }
    SloWatchdogConfig c;
    c.service.name = w.service;
    c.abort_burn_rate_5m = w.abort_burn_rate_5m;
    c.interval_ns = w.interval_ns;
    auto g = std::make_unique<SloWatchdog>(std::shared_ptr<InstantQuery>(std::move(*prom)), std::move(c));
    watchdog = g.get();
    guardrails->push_back(std::move(g));
  }
  RunOptions o;
  o.record = flags.record;
  o.json = flags.json;
  o.dry_run = flags.dry_run;
  o.who = who;
  o.redactor = flags.redactor;
  o.stop = io.stop;
  o.terminal = io.terminal;
  const int code = exit_code(guarded_run(fault, *guardrails, o, io.out, io.err));
  // What the watchdog saw of the fault, once it was armed (not in a dry run,
  // nor when its preflight refused): its abort, or a run that completed (not
  // one interrupted, or ended by another guardrail, while it held).
  nlohmann::json line = watchdog != nullptr ? watchdog->outcome_json() : nlohmann::json();
  if (watchdog != nullptr && watchdog->preflight() && watchdog->preflight()->verdict == "ready" &&
      (code == kExitCompleted || line["outcome"] == "aborted")) {
    line["event"] = "slo_watchdog_outcome";
    line["service"] = flags.slo_watchdog->service;
    if (flags.json)
      io.out << line.dump() << "\n";
    else
      io.err << who << ": slo watchdog: " << line.dump() << "\n";
  }
  return code;
}

Result<std::optional<HealthProbeConfig>> parse_health_flags(const cxxopts::ParseResult& r, const std::string& netns) {
  auto str = [&](const char* f) { return r[f].as<std::string>(); };
  if (!r.count("health-url")) {
    for (const char* f : {"health-max-latency", "health-ca"}) {
      if (r.count(f)) return bad(std::string("--") + f + " configures the health probe; give --health-url too");
    }
    return std::optional<HealthProbeConfig>{};
  }
  HealthProbeConfig h;
  h.url = str("health-url");
  auto u = parse_http_url(h.url);
  if (!u) return bad("--health-url " + u.error().message);
  h.netns = netns;
  if (r.count("health-ca")) {
    h.ca_file = str("health-ca");
    if (!u->tls) return bad("--health-ca is for an https:// --health-url; " + h.url + " is plain http");
    if (::access(h.ca_file.c_str(), R_OK) != 0) return bad("--health-ca " + h.ca_file + ": cannot be read");
  }
  if (r.count("health-max-latency")) {
    auto d = parse_duration_field(guardrail_field("health_max_latency"), str("health-max-latency"));
    if (!d) return d.error();
    h.max_latency_ns = *d;
  }
  auto interval = interval_flag(r, "interval");
  if (!interval) return interval.error();
  if (*interval) h.interval_ns = **interval;
  return std::optional<HealthProbeConfig>(h);
}

Result<std::optional<KernelSignalConfig>> parse_kernel_signal_flags(const cxxopts::ParseResult& r,
                                                                    const GuardrailLimits& limits) {
  auto str = [&](const char* f) { return r[f].as<std::string>(); };
  if (!r.count("kernel-signal")) {
    for (const char* f : {"signal-window", "signal-source"}) {
      if (r.count(f)) return bad(std::string("--") + f + " configures --kernel-signal; give --kernel-signal too");
    }
    return std::optional<KernelSignalConfig>{};
  }
  KernelSignalConfig k;
  k.signal = str("kernel-signal");
  if (!is_kernel_signal(k.signal))
    return bad("--kernel-signal '" + k.signal + "': expected tcp_retransmits or tcp_resets");
  const auto& own = limits.kernel_signal;
  if (own.empty()) return bad("--kernel-signal needs --abort-above N (events per second)");
  for (const auto& l : own) {
    if (l.flag != "--abort-above")
      return bad("--abort-below does not limit --kernel-signal: a rate is limited from above");
  }
  if (own.size() > 1) return bad("--kernel-signal takes one --abort-above");
  auto v = parse_number(own[0]);
  if (!v) return v.error();
  if (!(*v >= 0) || *v > 1e9) return bad("--abort-above '" + own[0].value + "': must be within 0-1e9 per second");
  k.abort_above = *v;
  if (r.count("signal-window")) {
    auto w = with_flag("signal-window", parse_duration_ns(str("signal-window")));
    if (!w) return w.error();
    if (*w < 500'000'000ULL || *w > 60'000'000'000ULL) return bad("--signal-window must be within 500ms-60s");
    k.window_ns = *w;
  }
  if (r.count("signal-source")) {
    auto src = parse_signal_source(str("signal-source"));
    if (!src) return bad("--signal-source '" + str("signal-source") + "': expected auto, tp_btf or procfs");
    k.source = *src;
  }
  return std::optional<KernelSignalConfig>(k);
}

Status parse_prometheus_flags(const cxxopts::ParseResult& r, const GuardrailLimits& limits, GuardrailOptions& into) {
  auto str = [&](const char* f) { return r[f].as<std::string>(); };
  const bool query = r.count("query") > 0, burn = r.count("slo-burn-rate") > 0;
  if (!r.count("prometheus-url")) {
    if (query || burn)
      return bad(std::string("--") + (query ? "query" : "slo-burn-rate") +
                 " asks Prometheus: give --prometheus-url too");
    for (const char* f : {"prometheus-ca", "prometheus-interval", "query-errors"}) {
      if (r.count(f))
        return bad(std::string("--") + f + " configures the Prometheus guardrails; give --prometheus-url too");
    }
  } else if (!query && !burn && !r.count("slo-watchdog")) {
    return bad(
        "--prometheus-url needs something to ask: --query PROMQL, --slo-burn-rate EXPR or --slo-watchdog SERVICE");
  }
  for (const char* f : {"slo-target", "burn-windows"}) {
    if (r.count(f) && !burn)
      return bad(std::string("--") + f + " configures --slo-burn-rate; give --slo-burn-rate too");
  }
  if (!query && !burn) return {};

  PrometheusPolling polling;
  polling.endpoint.url = str("prometheus-url");
  auto u = parse_http_url(polling.endpoint.url);
  if (!u) return bad("--prometheus-url " + u.error().message);
  if (u->path.find('?') != std::string::npos)
    return bad("--prometheus-url " + polling.endpoint.url + ": give the server's base URL, without a query");
  if (r.count("prometheus-ca")) {
    polling.endpoint.ca_file = str("prometheus-ca");
    if (!u->tls)
      return bad("--prometheus-ca is for an https:// --prometheus-url; " + polling.endpoint.url + " is plain http");
    if (::access(polling.endpoint.ca_file.c_str(), R_OK) != 0)
      return bad("--prometheus-ca " + polling.endpoint.ca_file + ": cannot be read");
  }
  // --prometheus-interval, else the --interval every polled guardrail shares, else 5 s.
  auto shared = interval_flag(r, "interval");
  if (!shared) return shared.error();
  auto own = interval_flag(r, "prometheus-interval");
  if (!own) return own.error();
  if (*own)
    polling.interval_ns = **own;
  else if (*shared)
    polling.interval_ns = **shared;
  if (r.count("query-errors")) {
    std::string n = str("query-errors");
    if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) > 100)
      return bad("--query-errors '" + n + "': a count of failed queries in a row, 0-100");
    polling.query_errors = std::stoi(n);
  }

  if (query) {
    PrometheusGuardrailConfig q;
    q.polling = polling;
    q.query = str("query");
    if (q.query.find_first_not_of(" \t\n") == std::string::npos) return bad("--query: empty PromQL");
    if (r.count("query") > 1) return bad("--query: give one query (one Prometheus guardrail)");
    if (limits.query.empty()) return bad("--query needs --abort-above X or --abort-below X (or both)");
    for (const auto& l : limits.query) {
      auto v = parse_number(l);
      if (!v) return v.error();
      auto& slot = l.flag == "--abort-above" ? q.abort_above : q.abort_below;
      if (slot) return bad("--query takes one " + l.flag);
      slot = *v;
    }
    if (q.abort_above && q.abort_below && !(*q.abort_below < *q.abort_above))
      return bad("--query: --abort-below must be below --abort-above, or every value is a breach");
    into.prometheus = q;
  }
  if (burn) {
    BurnRateConfig b;
    b.polling = polling;
    std::vector<std::string> exprs;
    for (const auto& kv : r.arguments()) {
      if (kv.key() == "slo-burn-rate") exprs.push_back(kv.value());
    }
    if (exprs.size() > 2)
      return bad("--slo-burn-rate: once with {window}, or twice (the fast window's query, then the slow one's)");
    b.fast_expression = exprs[0];
    if (exprs.size() == 2) {
      b.slow_expression = exprs[1];
      if (r.count("burn-windows"))
        return bad("--burn-windows fills {window} in one --slo-burn-rate; with two, each query names its own window");
    } else if (exprs[0].find("{window}") == std::string::npos) {
      return bad("--slo-burn-rate '" + exprs[0] +
                 "' has no {window} for the windows of --burn-windows; write one "
                 "(job:slo_errors_per_request:ratio_rate{window}) or give --slo-burn-rate twice (fast, then slow)");
    }
    if (r.count("burn-windows")) {
      std::string w = str("burn-windows");
      auto comma = w.find(',');
      if (comma == std::string::npos) return bad("--burn-windows '" + w + "': expected FAST,SLOW (5m,1h)");
      b.fast_window = w.substr(0, comma);
      b.slow_window = w.substr(comma + 1);
      auto fast = parse_prometheus_duration(b.fast_window);
      auto slow = parse_prometheus_duration(b.slow_window);
      if (!fast || !slow) return bad("--burn-windows '" + w + "': " + (fast ? slow : fast).error().message);
      if (!(*fast < *slow)) return bad("--burn-windows '" + w + "': the fast window comes first and is the shorter");
    }
    if (r.count("slo-target")) {
      auto t = with_flag("slo-target", parse_percent(str("slo-target")));
      if (!t) return t.error();
      if (!(*t > 0 && *t < 100))
        return bad("--slo-target '" + str("slo-target") + "': a percentage above 0 and below 100");
      b.slo_target = *t;
    }
    const auto& own_limits = limits.burn_rate;
    if (own_limits.empty())
      return bad("--slo-burn-rate needs --abort-above N (a burn rate: 14.4 spends a 30-day budget in 2 days)");
    if (own_limits.size() > 1 || own_limits[0].flag != "--abort-above")
      return bad("--slo-burn-rate takes one --abort-above (a burn rate), and no --abort-below");
    auto v = parse_number(own_limits[0]);
    if (!v) return v.error();
    if (!(*v > 0)) return bad("--abort-above '" + own_limits[0].value + "': a burn rate above 0");
    b.abort_above = *v;
    into.burn_rate = b;
  }
  return {};
}

Result<std::optional<SloWatchdogFlags>> parse_slo_watchdog_flags(const cxxopts::ParseResult& r) {
  auto str = [&](const char* f) { return r[f].as<std::string>(); };
  if (!r.count("slo-watchdog")) {
    if (r.count("abort-burn-rate-5m"))
      return bad("--abort-burn-rate-5m limits the SLO watchdog; give --slo-watchdog SERVICE too");
    return std::optional<SloWatchdogFlags>{};
  }
  SloWatchdogFlags w;
  if (r.count("slo-watchdog") > 1) return bad("--slo-watchdog: give one service (one watchdog per run)");
  w.service = str("slo-watchdog");
  if (!valid_service_name(w.service))
    return bad("--slo-watchdog '" + w.service +
               "': a service name is 1-63 of [a-z0-9._-], starting with a letter or digit");
  if (!r.count("prometheus-url"))
    return bad("--slo-watchdog reads the service's burn rate from Prometheus: give --prometheus-url too");
  if (!r.count("abort-burn-rate-5m"))
    return bad(
        "--slo-watchdog needs --abort-burn-rate-5m N (a 5m burn rate, 2-10: 10 spends a 30-day budget in 3 days)");
  {
    const std::string v = str("abort-burn-rate-5m");
    auto n = parse_number(GuardrailLimit{"--abort-burn-rate-5m", v});
    if (!n) return n.error();
    if (!(*n > 0)) return bad("--abort-burn-rate-5m '" + v + "': a burn rate above 0 (clamped to 2-10)");
    w.abort_burn_rate_5m = *n;
  }
  if (r.count("query-errors") && !r.count("query") && !r.count("slo-burn-rate"))
    return bad(
        "--query-errors is for --query and --slo-burn-rate; the --slo-watchdog tolerates no failed query "
        "(a silent Prometheus aborts)");
  w.prometheus.url = str("prometheus-url");
  auto u = parse_http_url(w.prometheus.url);
  if (!u) return bad("--prometheus-url " + u.error().message);
  if (r.count("prometheus-ca")) {
    w.prometheus.ca_file = str("prometheus-ca");
    if (!u->tls)
      return bad("--prometheus-ca is for an https:// --prometheus-url; " + w.prometheus.url + " is plain http");
    if (::access(w.prometheus.ca_file.c_str(), R_OK) != 0)
      return bad("--prometheus-ca " + w.prometheus.ca_file + ": cannot be read");
  }
  auto shared = interval_flag(r, "interval");
  if (!shared) return shared.error();
  auto own = interval_flag(r, "prometheus-interval");
  if (!own) return own.error();
  if (*own)
    w.interval_ns = **own;
  else if (*shared)
    w.interval_ns = **shared;
  return std::optional<SloWatchdogFlags>(w);
}

Result<std::optional<RecordOptions>> parse_record_flags(const cxxopts::ParseResult& r, bool has_health,
                                                        bool has_any_guardrail, uint64_t duration_ns,
                                                        uint64_t interval_ns, const std::vector<std::string>& args) {
  const bool has_guardrail = has_health || has_any_guardrail;
  const bool record = r.count("record") > 0, hyp = r.count("hypothesis") > 0, steady = r.count("steady-state") > 0,
             slo = r.count("slo") > 0;
  if (!record && !hyp && !steady && !slo) return std::optional<RecordOptions>{};
  if (hyp && !record) return bad("--hypothesis is kept in a record: add --record DIR");
  if (slo && !record) return bad("--slo is judged in a record: add --record DIR and --hypothesis");
  if (record && !hyp) return bad("--record needs --hypothesis \"TEXT\": a record starts with what you expect");
  if (!has_guardrail)
    return bad(std::string("--") + (record ? "record" : "steady-state") +
               " needs a guardrail signal to measure: add --health-url, --kernel-signal or --prometheus-url");
  RecordOptions o;
  if (hyp) {
    o.hypothesis = r["hypothesis"].as<std::string>();
    if (o.hypothesis.find_first_not_of(" \t") == std::string::npos) return bad("--hypothesis: empty text");
    if (o.hypothesis.size() > 4096) return bad("--hypothesis: longer than 4096 characters");
  }
  o.steady_state_ns = record ? 30'000'000'000ULL : 0;
  if (steady) {
    auto d = parse_duration_field(guardrail_field("steady_state"), r["steady-state"].as<std::string>());
    if (!d) return d.error();
    o.steady_state_ns = *d;
  }
  if (o.steady_state_ns < interval_ns)
    return bad("--steady-state " + format_duration(o.steady_state_ns) + " is shorter than the guardrail --interval " +
               format_duration(interval_ns) + ": it would hold one reading at most");
  if (record) {
    if (duration_ns < interval_ns)
      return bad("--duration " + format_duration(duration_ns) + " is shorter than the guardrail --interval " +
                 format_duration(interval_ns) + ": the record would hold no reading of the fault");
    o.dir = r["record"].as<std::string>();
    FL_TRY(check_record_dir(o.dir));
  }
  if (slo) {
    auto s = parse_slo(r["slo"].as<std::string>());
    if (!s) return s.error();
    if (s->metric == Slo::Metric::LatencyPercentile && !has_health)
      return bad("--slo " + s->text +
                 ": a latency percentile needs --health-url; with --kernel-signal alone use success>P%");
    o.slo = *s;
  }
  o.command_line = "faultctl run";
  for (const auto& a : args) {
    bool plain = !a.empty() && a.find_first_of(" \t\"'<>|&;$*?") == std::string::npos;
    o.command_line += " " + (plain ? a : "'" + a + "'");
  }
  return std::optional<RecordOptions>(std::move(o));
}

}  // namespace faultline
