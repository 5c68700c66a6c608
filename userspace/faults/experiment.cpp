// The experiment loop: a 100 ms tick, a status line each second, the guardrail each interval.
#include "userspace/faults/stop_signals.h"
#include "userspace/faults/experiment.h"

#include <bpf/bpf.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace faultline {
namespace {

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  nanosleep(&ts, nullptr);  // a signal cuts it short, which is what we want
}

std::string pct(uint64_t part, uint64_t whole) {
  if (whole == 0) return "0%";
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << 100.0 * static_cast<double>(part) / static_cast<double>(whole) << "%";
  return o.str();
}

nlohmann::json counters(const fl_fault_stats& s) {
  return {{"matched", s.matched}, {"dropped", s.dropped},   {"corrupted", s.corrupted},
          {"duplicated", s.duplicated}, {"delayed", s.delayed}, {"bytes", s.bytes}};
}

std::string status_line(const FaultSpec& spec, uint64_t left_ns, const fl_fault_stats& s) {
  std::ostringstream o;
  o << "[" << spec.summary() << "] " << std::max<uint64_t>(left_ns / 1'000'000'000ULL, 0) << "s left | matched "
    << s.matched;
  switch (spec.kind) {
    case FaultKind::Corrupt: o << " corrupted " << s.corrupted; break;
    case FaultKind::Duplicate: o << " duplicated " << s.duplicated; break;
    case FaultKind::Latency:
    case FaultKind::Bandwidth: o << " delayed " << s.delayed; break;
    default: o << " dropped " << s.dropped << " (" << pct(s.dropped, s.matched) << ")";
  }
  return o.str();
}

}  // namespace

void Experiment::emit(const nlohmann::json& event) { out_ << event.dump() << std::endl; }

int Experiment::run() {
  NetfaultEngine engine;
  auto plan = engine.plan(opts_.spec, opts_.attach);
  if (!plan) {
    err_ << "faultctl run: " << plan.error().describe() << "\n";
    int e = plan.error().err;
    bool input = e == EINVAL || e == ERANGE || e == ENOENT || e == ENODEV;
    return input ? kExitBadInput : kExitFailure;
  }
  std::optional<HealthProbe> probe;
  if (opts_.health) {
    auto p = HealthProbe::create(*opts_.health);
    if (!p) {
      err_ << "faultctl run: " << p.error().describe() << "\n";
      return kExitBadInput;
    }
    probe.emplace(std::move(*p));
  }
  if (opts_.dry_run) {
    nlohmann::json j = plan->to_json();
    j["dry_run"] = true;
    if (probe) j["guardrail"] = {{"health_url", opts_.health->url}, {"max_latency", format_duration(opts_.health->max_latency_ns)}};
    if (opts_.record) j["record"] = {{"dir", opts_.record->dir}, {"steady_state", format_duration(opts_.record->steady_state_ns)}};
    if (opts_.json) {
      emit(j);
    } else {
      out_ << "dry run: would apply " << opts_.spec.summary() << " for " << format_duration(opts_.spec.duration_ns)
           << "\n  mechanism: " << plan->mechanism << "\n  devices:";
      for (const auto& d : plan->devices) out_ << " " << d.name;
      out_ << "\n  fault: " << opts_.spec.to_json().dump() << "\nnothing was changed.\n";
    }
    return kExitCompleted;
  }

  // The kernel-signal guardrail starts counting before the fault, so its first
  // window is not empty.
  std::optional<KernelSignalGuard> ksig;
  if (opts_.kernel_signal) {
    KernelSignalConfig cfg = *opts_.kernel_signal;
    cfg.netns_ino = plan->netns.inode;
    auto g = KernelSignalGuard::start(cfg);
    if (!g) {
      err_ << "faultctl run: " << g.error().describe() << "\n";
      return kExitFailure;
    }
    ksig.emplace(std::move(*g));
  }

  StopSignals signals;
  // Record hooks: steady state and the fingerprinted hypothesis come before the fault.
  std::optional<RecordedRun> recorded;
  auto stop = [&] { return signals.pending() != 0; };
  if (opts_.record) {
    if (!probe && !ksig) {
      err_ << "faultctl run: --record and --steady-state need a guardrail signal (--health-url or --kernel-signal)\n";
      return kExitBadInput;
    }
    nlohmann::json guard = nlohmann::json::object();
    if (probe)
      guard = {{"health_url", opts_.health->url}, {"max_latency", format_duration(opts_.health->max_latency_ns)},
               {"interval", format_duration(opts_.health->interval_ns)}};
    if (ksig) guard["kernel_signal"] = {{"signal", ksig->config().signal}, {"abort_above_per_s", ksig->config().abort_above}};
    auto sampler = [&] { return sample_guardrails(probe ? &*probe : nullptr, ksig ? &*ksig : nullptr); };
    recorded.emplace(*opts_.record, sampler, probe ? opts_.health->interval_ns : kKernelSignalRecordIntervalNs, guard, out_,
                     opts_.json);
    auto go = recorded->before_fault(plan->to_json(), stop);
    if (!go) {
      err_ << "faultctl run: " << go.error().describe() << "\n";
      return kExitFailure;
    }
    if (!*go) {
      err_ << "faultctl run: refusing to inject: " << recorded->refusal() << "\n";
      return kExitGuardrail;
    }
  }
  auto applied = engine.apply(*plan, static_cast<uint32_t>(::getpid()));
  if (!applied) {
    err_ << "faultctl run: " << applied.error().describe() << "\n";
    if (recorded) (void)recorded->after_fault(RunOutcome::Failed, applied.error().describe(), [] { return true; });
    return applied.error().err == EEXIST ? kExitBadInput : kExitFailure;
  }
  if (recorded) recorded->fault_started();
  const uint32_t slot = applied->slot;
  auto maps = PinnedMaps::open(engine.layout(), false);
  if (!maps) {
    err_ << "faultctl run: " << maps.error().describe() << "\n";
    (void)engine.end(slot);
    return kExitFailure;
  }
  FaultTable table(*maps);
  const bool tty = !opts_.json && ::isatty(STDERR_FILENO);
  if (opts_.json) {
    nlohmann::json j = plan->to_json();
    j["event"] = "started";
    j["id"] = slot;
    j["attach"] = applied->attach_mode;
    emit(j);
  } else {
    out_ << "fault " << slot << " applied: " << opts_.spec.summary() << " for " << format_duration(opts_.spec.duration_ns)
         << " via " << applied->attach_mode << " on";
    for (const auto& d : plan->devices) out_ << " " << d.name;
    out_ << std::endl;
  }

  std::string reason = "completed";
  std::string detail;
  int code = kExitCompleted;
  uint64_t next_probe = boottime_ns() + (probe ? probe->config().interval_ns : 0);
  uint64_t next_status = boottime_ns();
  uint64_t next_ksig = boottime_ns() + 500'000'000ULL;
  uint64_t next_ksig_record = boottime_ns() + kKernelSignalRecordIntervalNs;
  for (;;) {
    uint64_t now = boottime_ns();
    if (now >= applied->expires_ns) break;
    if (int sig = signals.pending(); sig != 0) {
      reason = "interrupted";
      detail = std::string("by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM");
      code = kExitFailure;
      break;
    }
    fl_fault f{};
    if (!table.exists(slot) || bpf_map_lookup_elem(maps->faults(), &slot, &f) != 0 || f.expires_ns == 0) {
      reason = "aborted";
      detail = "ended from outside (faultctl abort)";
      code = kExitFailure;
      break;
    }
    if (ksig && now >= next_ksig) {
      ProbeOutcome o = ksig->sample();
      if (opts_.json) emit({{"event", "kernel_signal"}, {"signal", ksig->config().signal}, {"rate_per_s", ksig->last_rate()}});
      if (recorded && !probe && (now >= next_ksig_record || !o.healthy)) {  // the kernel signal is the record's only signal
        SignalSample rs{boottime_ns(), true, {}, ""};
        add_kernel_reading(rs, ksig->config().signal, ksig->last_rate(), o);
        recorded->fault_sample(rs);
        next_ksig_record = now + kKernelSignalRecordIntervalNs;
      }
      if (!o.healthy) {
        (void)table.deactivate(slot);
        reason = "guardrail";
        detail = "kernel signal: " + o.problem;
        code = kExitGuardrail;
        break;
      }
      next_ksig = now + 500'000'000ULL;
    }
    if (probe && now >= next_probe) {
      ProbeOutcome o = probe->check();
      if (recorded) {
        SignalSample rs = sample_from_probe(o, boottime_ns());
        if (ksig) add_kernel_reading(rs, ksig->config().signal, ksig->last_rate(), ProbeOutcome{true, 0, 0, ""});
        recorded->fault_sample(rs);
      }
      if (opts_.json) {
        emit({{"event", "probe"}, {"healthy", o.healthy}, {"latency_ms", o.latency_ns / 1e6}, {"status", o.status}, {"problem", o.problem}});
      }
      if (!o.healthy) {
        (void)table.deactivate(slot);  // end the fault before anything else
        reason = "guardrail";
        detail = "health check failed: " + o.problem;
        code = kExitGuardrail;
        break;
      }
      next_probe = boottime_ns() + probe->config().interval_ns;
    }
    if (now >= next_status) {
      auto s = table.stats(slot);
      fl_fault_stats st = s ? *s : fl_fault_stats{};
      uint64_t left = applied->expires_ns > now ? applied->expires_ns - now : 0;
      if (opts_.json) {
        nlohmann::json j{{"event", "progress"}, {"id", slot}, {"left_s", left / 1'000'000'000ULL}};
        j["counters"] = counters(st);
        emit(j);
      } else if (tty) {
        err_ << "\r\033[K" << status_line(opts_.spec, left, st) << std::flush;
      } else if ((now - (applied->expires_ns - opts_.spec.duration_ns)) % 5'000'000'000ULL < 1'000'000'000ULL) {
        err_ << status_line(opts_.spec, left, st) << "\n";
      }
      next_status = now + 1'000'000'000ULL;
    }
    sleep_ms(100);
  }

  auto s = table.stats(slot);
  fl_fault_stats st = s ? *s : fl_fault_stats{};
  if (tty) err_ << "\r\033[K";
  auto ended = engine.end(slot);
  if (recorded) recorded->fault_ended();
  if (!ended) {
    err_ << "faultctl run: the fault ended in the kernel, but cleaning up failed: " << ended.error().describe() << "\n";
    if (code == kExitCompleted) code = kExitFailure;
  }
  if (opts_.json) {
    nlohmann::json j{{"event", "ended"}, {"id", slot}, {"reason", reason}, {"exit_code", code}};
    if (!detail.empty()) j["detail"] = detail;
    j["counters"] = counters(st);
    emit(j);
  } else {
    out_ << "fault " << slot << " ended (" << reason << (detail.empty() ? "" : ": " + detail) << "): "
         << status_line(opts_.spec, 0, st).substr(status_line(opts_.spec, 0, st).find("matched")) << std::endl;
    if (code == kExitGuardrail) err_ << "faultctl run: guardrail breached, fault aborted: " << detail << "\n";
  }
  if (recorded) {
    RunOutcome outcome = reason == "completed"   ? RunOutcome::Completed
                         : reason == "guardrail" ? RunOutcome::Guardrail
                         : reason == "aborted"   ? RunOutcome::AbortedFromOutside
                                                 : RunOutcome::Interrupted;
    if (!ended && outcome == RunOutcome::Completed) outcome = RunOutcome::Failed;
    HypothesisVerdict v = recorded->after_fault(outcome, detail.empty() ? reason : detail, stop);
    if (v == HypothesisVerdict::Refuted && code == kExitCompleted) code = kExitRefuted;
  }
  return code;
}

}  // namespace faultline
