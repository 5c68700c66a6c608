// The shared run flags, and run_fault(): guardrails, the guarded run, the exit code.
#include "ctl/run_flags.h"

#include <iostream>

#include "base/units.h"
#include "ctl/flag_error.h"
#include "userspace/guardrails/http.h"
#include "userspace/run/guarded_run.h"

namespace faultline {

void add_run_options(cxxopts::Options& o) {
  // clang-format off
  o.add_options("guardrail")
      ("health-url", "http:// URL the guardrail GETs", cxxopts::value<std::string>())
      ("health-max-latency", "slowest healthy answer (default 1s)", cxxopts::value<std::string>())
      ("interval", "time between guardrail checks (default 2s)", cxxopts::value<std::string>())
      ("kernel-signal", "guardrail on a kernel signal: tcp_retransmits|tcp_resets", cxxopts::value<std::string>())
      ("abort-above", "kernel-signal limit, events per second", cxxopts::value<std::string>())
      ("signal-window", "kernel-signal averaging window (default 3s)", cxxopts::value<std::string>());
  o.add_options("experiment record")
      ("hypothesis", "what you expect to hold during the fault (kept in the record)", cxxopts::value<std::string>())
      ("steady-state", "measure the guardrail signal this long before injecting (default 30s with --record)", cxxopts::value<std::string>())
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
  auto health = parse_health_flags(r, probe_netns);
  if (!health) return health.error();
  f.guardrails.health = *health;
  auto ksig = parse_kernel_signal_flags(r);
  if (!ksig) return ksig.error();
  f.guardrails.kernel_signal = *ksig;
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
  // A record keeps a reading every probe interval, or every second with the kernel signal alone.
  const uint64_t interval = f.guardrails.health ? f.guardrails.health->interval_ns : 1'000'000'000ULL;
  auto rec = parse_record_flags(r, f.guardrails.health.has_value(), f.guardrails.kernel_signal.has_value(), duration_ns,
                                interval, args);
  if (!rec) return rec.error();
  f.record = *rec;
  if (f.record) f.record->redactor = f.redactor;
  return f;
}

int run_fault(RunnableFault& fault, const RunFlags& flags, const std::string& who) {
  auto guardrails = make_guardrails(flags.guardrails, fault.netns_inode());
  if (!guardrails) {
    std::cerr << who << ": " << guardrails.error().describe() << "\n";
    return guardrails.error().bad_input ? kExitBadInput : kExitFailure;
  }
  RunOptions o;
  o.record = flags.record;
  o.json = flags.json;
  o.dry_run = flags.dry_run;
  o.who = who;
  o.redactor = flags.redactor;
  return exit_code(guarded_run(fault, *guardrails, o, std::cout, std::cerr));
}

Result<std::optional<HealthProbeConfig>> parse_health_flags(const cxxopts::ParseResult& r, const std::string& netns) {
  auto str = [&](const char* f) { return r[f].as<std::string>(); };
  if (!r.count("health-url")) {
    if (r.count("health-max-latency") || r.count("interval"))
      return bad(std::string("--") + (r.count("interval") ? "interval" : "health-max-latency") +
                 " configures the guardrail; give --health-url too");
    return std::optional<HealthProbeConfig>{};
  }
  HealthProbeConfig h;
  h.url = str("health-url");
  auto u = parse_http_url(h.url);
  if (!u) return bad("--health-url " + u.error().message);
  h.netns = netns;
  if (r.count("health-max-latency")) {
    auto d = with_flag("health-max-latency", parse_duration_ns(str("health-max-latency")));
    if (!d) return d.error();
    if (*d < 1'000'000ULL || *d > 60'000'000'000ULL) return bad("--health-max-latency must be within 1ms-60s");
    h.max_latency_ns = *d;
  }
  if (r.count("interval")) {
    auto d = with_flag("interval", parse_duration_ns(str("interval")));
    if (!d) return d.error();
    if (*d < 100'000'000ULL || *d > 600'000'000'000ULL) return bad("--interval must be within 100ms-10m");
    h.interval_ns = *d;
  }
  return std::optional<HealthProbeConfig>(h);
}

Result<std::optional<KernelSignalConfig>> parse_kernel_signal_flags(const cxxopts::ParseResult& r) {
  auto str = [&](const char* f) { return r[f].as<std::string>(); };
  if (!r.count("kernel-signal")) {
    if (r.count("abort-above") || r.count("signal-window"))
      return bad("--abort-above and --signal-window configure --kernel-signal; give --kernel-signal too");
    return std::optional<KernelSignalConfig>{};
  }
  KernelSignalConfig k;
  k.signal = str("kernel-signal");
  if (!is_kernel_signal(k.signal))
    return bad("--kernel-signal '" + k.signal + "': expected tcp_retransmits or tcp_resets");
  if (!r.count("abort-above")) return bad("--kernel-signal needs --abort-above N (events per second)");
  double v = 0;
  std::string a = str("abort-above");
  try {
    size_t used = 0;
    v = std::stod(a, &used);
    if (used != a.size()) throw std::invalid_argument(a);
  } catch (...) {
    return bad("--abort-above '" + a + "': not a number");
  }
  if (!(v >= 0) || v > 1e9) return bad("--abort-above '" + a + "': must be within 0-1e9 per second");
  k.abort_above = v;
  if (r.count("signal-window")) {
    auto w = with_flag("signal-window", parse_duration_ns(str("signal-window")));
    if (!w) return w.error();
    if (*w < 500'000'000ULL || *w > 60'000'000'000ULL) return bad("--signal-window must be within 500ms-60s");
    k.window_ns = *w;
  }
  return std::optional<KernelSignalConfig>(k);
}

Result<std::optional<RecordOptions>> parse_record_flags(const cxxopts::ParseResult& r, bool has_health,
                                                        bool has_kernel_signal, uint64_t duration_ns,
                                                        uint64_t interval_ns, const std::vector<std::string>& args) {
  const bool has_guardrail = has_health || has_kernel_signal;
  const bool record = r.count("record") > 0, hyp = r.count("hypothesis") > 0, steady = r.count("steady-state") > 0,
             slo = r.count("slo") > 0;
  if (!record && !hyp && !steady && !slo) return std::optional<RecordOptions>{};
  if (hyp && !record) return bad("--hypothesis is kept in a record: add --record DIR");
  if (slo && !record) return bad("--slo is judged in a record: add --record DIR and --hypothesis");
  if (record && !hyp) return bad("--record needs --hypothesis \"TEXT\": a record starts with what you expect");
  if (!has_guardrail)
    return bad(std::string("--") + (record ? "record" : "steady-state") +
               " needs a guardrail signal to measure: add --health-url or --kernel-signal");
  RecordOptions o;
  if (hyp) {
    o.hypothesis = r["hypothesis"].as<std::string>();
    if (o.hypothesis.find_first_not_of(" \t") == std::string::npos) return bad("--hypothesis: empty text");
    if (o.hypothesis.size() > 4096) return bad("--hypothesis: longer than 4096 characters");
  }
  o.steady_state_ns = record ? 30'000'000'000ULL : 0;
  if (steady) {
    auto d = with_flag("steady-state", parse_duration_ns(r["steady-state"].as<std::string>()));
    if (!d) return d.error();
    if (*d < 1'000'000'000ULL || *d > 600'000'000'000ULL) return bad("--steady-state must be within 1s-10m");
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
