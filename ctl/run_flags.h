// The flags every `faultctl run` shares, packet, resource and syscall faults
// alike: guardrails (--health-url, --kernel-signal, --prometheus-url with --query
// or --slo-burn-rate; any number at once), the experiment record
// (--hypothesis, --steady-state, --record, --slo) and output (--json,
// --dry-run, --redact-pattern, --no-redact); and the one way a parsed run is run.
#pragma once

#include <cstdint>
#include <cxxopts.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/guardrails/guardrail_options.h"
#include "userspace/guardrails/prometheus.h"
#include "userspace/run/guarded_run.h"
#include "userspace/run/record.h"
#include "userspace/run/runnable_fault.h"

namespace faultline {

// --slo-watchdog SERVICE --abort-burn-rate-5m N with --prometheus-url: the
// orchestration's SLO watchdog (userspace/orchestration/watchdog.h), armed only
// by its preflight, one more guardrail of the run.
struct SloWatchdogFlags {
  std::string service;
  double abort_burn_rate_5m = 0;             // as written; the watchdog clamps it to 2-10
  PrometheusEndpoint prometheus;             // --prometheus-url, --prometheus-ca
  uint64_t interval_ns = 10'000'000'000ULL;  // --prometheus-interval, else --interval, else 10 s
};

struct RunFlags {
  GuardrailOptions guardrails;
  std::optional<SloWatchdogFlags> slo_watchdog;
  std::optional<RecordOptions> record;
  bool json = false;
  bool dry_run = false;
  Redactor redactor;  // --redact-pattern, --no-redact
};

// Adds the "guardrail", "experiment record" and "output" groups.
void add_run_options(cxxopts::Options& o);

// probe_netns: where the health probe connects from (the fault's namespace);
// duration_ns: the run's (a record needs a reading of the fault); args: the
// command line after "run", kept in the record.
[[nodiscard]] Result<RunFlags> parse_run_flags(const cxxopts::ParseResult& r, const std::string& probe_netns,
                                               uint64_t duration_ns, const std::vector<std::string>& args);

// Builds the guardrails for the fault, runs it under guarded_run() and returns
// the exit code (the contract of base/exit_code.h). who prefixes error lines.
[[nodiscard]] int run_fault(RunnableFault& fault, const RunFlags& flags, const std::string& who);
// The same, printing to io and stopped by its signals (a run faultd serves).
[[nodiscard]] int run_fault(RunnableFault& fault, const RunFlags& flags, const std::string& who, const RunIo& io);

// One --abort-above or --abort-below, as written.
struct GuardrailLimit {
  std::string flag;  // "--abort-above" or "--abort-below"
  std::string value;
};

// The limits of each thresholded guardrail. A limit belongs to the guardrail
// flag written before it (--kernel-signal, --query, --slo-burn-rate); with only
// one of them, it may come anywhere. A limit before any of several is an error.
struct GuardrailLimits {
  std::vector<GuardrailLimit> kernel_signal, query, burn_rate;
};

// The parts of parse_run_flags(), for tests.
[[nodiscard]] Result<GuardrailLimits> bind_limits(const cxxopts::ParseResult& r);
[[nodiscard]] Result<std::optional<HealthProbeConfig>> parse_health_flags(const cxxopts::ParseResult& r,
                                                                          const std::string& netns);
[[nodiscard]] Result<std::optional<KernelSignalConfig>> parse_kernel_signal_flags(const cxxopts::ParseResult& r,
                                                                                  const GuardrailLimits& limits);
// --prometheus-url with --query and/or --slo-burn-rate, into `into`.
[[nodiscard]] Status parse_prometheus_flags(const cxxopts::ParseResult& r, const GuardrailLimits& limits,
                                            GuardrailOptions& into);
// --slo-watchdog and --abort-burn-rate-5m (none: nullopt).
[[nodiscard]] Result<std::optional<SloWatchdogFlags>> parse_slo_watchdog_flags(const cxxopts::ParseResult& r);
[[nodiscard]] Result<std::optional<RecordOptions>> parse_record_flags(const cxxopts::ParseResult& r, bool has_health,
                                                                      bool has_any_guardrail, uint64_t duration_ns,
                                                                      uint64_t interval_ns,
                                                                      const std::vector<std::string>& args);

}  // namespace faultline
