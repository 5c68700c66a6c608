// The resource-fault run loop: a 100 ms tick, a status line each second, the guardrail each interval.
#include "userspace/faults/stop_signals.h"
#include "userspace/faults/resource_experiment.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <ostream>

#include "loader/netns.h"
#include "userspace/faults/experiment.h"
#include "userspace/faults/netfault_engine.h"
#include "userspace/faults/resource_fault.h"
#include "userspace/faults/resource_reaper.h"
#include "userspace/faults/resource_store.h"
#include "userspace/faults/units.h"

namespace faultline {
namespace {

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  nanosleep(&ts, nullptr);
}

const char* signal_text(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP"; }

// Plan errors describe the input against this system (no such pid, a refused
// target, a floor): bad input. Only a failure to read the system is not.
bool plan_error_is_input(const Error& e) { return e.err != EIO && e.err != ENOMEM; }

constexpr uint64_t kApplyBudgetNs = 120'000'000'000ULL;

}  // namespace

void ResourceExperiment::emit(const nlohmann::json& event) { out_ << event.dump() << std::endl; }

int ResourceExperiment::run() {
  const ResourceSpec& spec = opts_.spec;
  auto planned = plan_resource_fault(spec);
  if (!planned) {
    err_ << "faultctl run: " << planned.error().describe() << "\n";
    return plan_error_is_input(planned.error()) ? kExitBadInput : kExitFailure;
  }
  std::unique_ptr<ResourceFault> fault = std::move(*planned);
  std::optional<HealthProbe> probe;
  if (opts_.health) {
    auto p = HealthProbe::create(*opts_.health);
    if (!p) {
      err_ << "faultctl run: " << p.error().describe() << "\n";
      return kExitBadInput;
    }
    probe.emplace(std::move(*p));
  }
  nlohmann::json guard = nullptr;
  if (opts_.health)
    guard = {{"health_url", opts_.health->url},
             {"max_latency", format_duration(opts_.health->max_latency_ns)},
             {"interval", format_duration(opts_.health->interval_ns)}};
  if (opts_.kernel_signal) {
    if (guard.is_null()) guard = nlohmann::json::object();
    guard["kernel_signal"] = {{"signal", opts_.kernel_signal->signal},
                              {"abort_above_per_s", opts_.kernel_signal->abort_above}};
  }
  const uint64_t grace = reaper_grace_ns();

  if (opts_.dry_run) {
    nlohmann::json j = spec.to_json();
    j["dry_run"] = true;
    j["plan"] = fault->plan();
    j["deadman"] = {{"reaper", "detached, own session"},
                    {"grace", format_duration(grace)},
                    {"state", ResourceFaultStore::default_root()}};
    if (!guard.is_null()) j["guardrail"] = guard;
    if (opts_.record)
      j["record"] = {{"dir", opts_.record->dir}, {"steady_state", format_duration(opts_.record->steady_state_ns)}};
    if (opts_.json) {
      emit(j);
    } else {
      out_ << "dry run: would apply " << spec.summary() << " for " << format_duration(spec.duration_ns)
           << "\n  plan: " << fault->plan().dump() << "\n  deadman: a detached reaper reverts it at expiry + "
           << format_duration(grace) << " whatever happens to faultctl\nnothing was changed.\n";
    }
    return kExitCompleted;
  }

  // The kernel-signal guardrail counts from before the fault (and the steady state),
  // in the host's namespace: that is where a host resource fault bites.
  std::optional<KernelSignalGuard> ksig;
  if (opts_.kernel_signal) {
    KernelSignalConfig cfg = *opts_.kernel_signal;
    auto host = resolve_netns("");
    if (!host) {
      err_ << "faultctl run: " << host.error().describe() << "\n";
      return kExitFailure;
    }
    cfg.netns_ino = host->inode;
    auto g = KernelSignalGuard::start(cfg);
    if (!g) {
      err_ << "faultctl run: " << g.error().describe() << "\n";
      return kExitFailure;
    }
    ksig.emplace(std::move(*g));
  }

  StopSignals signals(true);
  auto stop = [&] { return signals.pending() != 0; };
  std::optional<RecordedRun> recorded;
  if (opts_.record) {
    if (!probe && !ksig) {
      err_ << "faultctl run: --record and --steady-state need a guardrail signal (--health-url or --kernel-signal)\n";
      return kExitBadInput;
    }
    auto sampler = [&] { return sample_guardrails(probe ? &*probe : nullptr, ksig ? &*ksig : nullptr); };
    recorded.emplace(*opts_.record, sampler, probe ? opts_.health->interval_ns : kKernelSignalRecordIntervalNs, guard,
                     out_, opts_.json);
    nlohmann::json what = spec.to_json();
    what["plan"] = fault->plan();
    auto go = recorded->before_fault(what, stop);
    if (!go) {
      err_ << "faultctl run: " << go.error().describe() << "\n";
      return kExitFailure;
    }
    if (!*go) {
      err_ << "faultctl run: refusing to inject: " << recorded->refusal() << "\n";
      return kExitGuardrail;
    }
  }
  auto fail_before_start = [&](const std::string& what) {
    err_ << "faultctl run: " << what << "\n";
    if (recorded) (void)recorded->after_fault(RunOutcome::Failed, what, [] { return true; });
    return kExitFailure;
  };

  auto store = ResourceFaultStore::open(true);
  if (!store) return fail_before_start(store.error().describe() + " (set FAULTLINE_RUN_DIR, or run as root)");
  auto id = store->allocate_id();
  if (!id) return fail_before_start(id.error().describe());

  // 1. The state, before anything else exists: whoever finds it can undo what follows.
  ResourceFaultState st;
  st.id = *id;
  st.token = random_token();
  st.kind = resource_kind_name(spec.kind);
  st.summary = spec.summary();
  st.spec = spec.to_json();
  st.plan = fault->plan();
  st.boot_id = boot_id();
  if (auto self = read_process(::getpid())) st.owner = self->identity();
  st.expires_ns = boottime_ns() + spec.duration_ns + kApplyBudgetNs;
  st.grace_ns = grace;
  st.created_wall = wall_seconds();
  if (recorded) st.record_dir = opts_.record->dir;
  {
    auto lock = store->lock(st.id);
    if (!lock) return fail_before_start(lock.error().describe());
    if (auto w = store->write(st); !w) return fail_before_start(w.error().describe());
  }
  // 2. The deadman, before the first change.
  auto reaper = spawn_reaper(*store, st.id);
  if (!reaper) {
    (void)store->remove(st.id);
    return fail_before_start("cannot start the reaper (" + reaper.error().describe() +
                             "); refusing a fault that nothing would end");
  }
  // 3. The change, journalled ahead, under the lock so that no abort interleaves.
  Status applied = [&]() -> Status {
    auto lock = store->lock(st.id);
    if (!lock) return lock.error();
    st.reaper = *reaper;
    FL_TRY(store->write(st));
    UndoJournal journal(*store, st);
    FL_TRY(fault->apply(journal));
    st.phase = "active";
    st.expires_ns = boottime_ns() + spec.duration_ns;
    st.plan = fault->plan();
    return store->write(st);
  }();
  if (!applied) {
    auto r = revert_fault(*store, st.id, "apply failed");
    fault->release();
    std::string what = "could not apply " + spec.summary() + ": " + applied.error().describe();
    if (!r)
      what += "; the revert failed too (" + r.error().describe() + "), the reaper and the next faultctl retry it";
    else
      what += "; everything done so far was reverted";
    return fail_before_start(what);
  }
  if (recorded) recorded->fault_started();
  const uint64_t expires = st.expires_ns;
  if (opts_.json) {
    nlohmann::json j = spec.to_json();
    j["event"] = "started";
    j["id"] = st.id;
    j["plan"] = st.plan;
    j["reaper_pid"] = reaper->pid;
    j["grace"] = format_duration(grace);
    j["state"] = store->state_path(st.id);
    emit(j);
  } else {
    out_ << "fault " << st.id << " applied: " << spec.summary() << " for " << format_duration(spec.duration_ns)
         << "\n  reaper pid " << reaper->pid << " reverts it by expiry + " << format_duration(grace)
         << " even if faultctl dies; faultctl abort " << st.id << " ends it now" << std::endl;
  }

  std::string reason = "completed", detail;
  RunOutcome outcome = RunOutcome::Completed;
  int code = kExitCompleted;
  const bool tty = !opts_.json && ::isatty(STDERR_FILENO);
  uint64_t next_probe = boottime_ns() + (probe ? probe->config().interval_ns : 0);
  uint64_t next_ksig = boottime_ns() + 500'000'000ULL;
  uint64_t next_ksig_record = boottime_ns() + kKernelSignalRecordIntervalNs;
  uint64_t next_status = boottime_ns() + 1'000'000'000ULL;
  const std::string state_path = store->state_path(st.id);
  for (;;) {
    uint64_t now = boottime_ns();
    if (now >= expires) break;
    if (int sig = signals.pending(); sig != 0) {
      reason = "interrupted";
      detail = std::string("by ") + signal_text(sig);
      outcome = RunOutcome::Interrupted;
      code = kExitFailure;
      break;
    }
    struct stat sb {};
    if (::stat(state_path.c_str(), &sb) != 0) {
      reason = "aborted";
      detail = "ended from outside (faultctl abort)";
      outcome = RunOutcome::AbortedFromOutside;
      code = kExitFailure;
      break;
    }
    if (auto c = fault->check(); !c) {
      reason = "failed";
      detail = c.error().describe();
      outcome = RunOutcome::Failed;
      code = kExitFailure;
      break;
    }
    if (ksig && now >= next_ksig) {
      ProbeOutcome o = ksig->sample();
      if (opts_.json)
        emit({{"event", "kernel_signal"}, {"signal", ksig->config().signal}, {"rate_per_s", ksig->last_rate()}});
      if (recorded && !probe && (now >= next_ksig_record || !o.healthy)) {  // the record's only signal
        SignalSample rs{boottime_ns(), true, {}, ""};
        add_kernel_reading(rs, ksig->config().signal, ksig->last_rate(), o);
        recorded->fault_sample(rs);
        next_ksig_record = now + kKernelSignalRecordIntervalNs;
      }
      if (!o.healthy) {
        (void)revert_fault(*store, st.id, "guardrail");
        reason = "guardrail";
        detail = "kernel signal: " + o.problem;
        outcome = RunOutcome::Guardrail;
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
        emit({{"event", "probe"},
              {"healthy", o.healthy},
              {"latency_ms", o.latency_ns / 1e6},
              {"status", o.status},
              {"problem", o.problem}});
      }
      if (!o.healthy) {
        (void)revert_fault(*store, st.id, "guardrail");  // end the fault before anything else
        reason = "guardrail";
        detail = "health check failed: " + o.problem;
        outcome = RunOutcome::Guardrail;
        code = kExitGuardrail;
        break;
      }
      next_probe = boottime_ns() + probe->config().interval_ns;
    }
    if (now >= next_status) {
      uint64_t left_s = (expires - now) / 1'000'000'000ULL;
      nlohmann::json seen = fault->observe();
      if (opts_.json) {
        emit({{"event", "progress"}, {"id", st.id}, {"left_s", left_s}, {"observed", seen}});
      } else {
        std::string line =
            "[" + st.id + " " + spec.summary() + "] " + std::to_string(left_s) + "s left | " + seen.value("text", "");
        if (tty)
          err_ << "\r\033[K" << line << std::flush;
        else if (left_s % 5 == 0)
          err_ << line << "\n";
      }
      next_status = now + 1'000'000'000ULL;
    }
    sleep_ms(100);
  }

  nlohmann::json seen = fault->observe();
  if (tty) err_ << "\r\033[K";
  auto reverted = revert_fault(*store, st.id, reason);
  fault->release();
  if (recorded) recorded->fault_ended();
  if (!reverted) {
    err_ << "faultctl run: reverting fault " << st.id << " failed: " << reverted.error().describe()
         << "; the reaper and the next faultctl retry it (faultctl status shows it)\n";
    code = kExitFailure;
    if (outcome == RunOutcome::Completed) outcome = RunOutcome::Failed;
  }
  if (opts_.json) {
    nlohmann::json j{{"event", "ended"},  {"id", st.id},      {"reason", reason},
                     {"exit_code", code}, {"observed", seen}, {"reverted", reverted.ok()}};
    if (!detail.empty()) j["detail"] = detail;
    emit(j);
  } else {
    out_ << "fault " << st.id << " ended (" << reason << (detail.empty() ? "" : ": " + detail)
         << "): " << seen.value("text", "") << (reverted ? "; reverted" : "; NOT reverted") << std::endl;
    if (code == kExitGuardrail) err_ << "faultctl run: guardrail breached, fault reverted: " << detail << "\n";
    if (outcome == RunOutcome::Failed && reverted) err_ << "faultctl run: " << detail << "\n";
  }
  if (recorded) {
    HypothesisVerdict v = recorded->after_fault(outcome, detail.empty() ? reason : detail, stop);
    if (v == HypothesisVerdict::Refuted && code == kExitCompleted) code = kExitRefuted;
  }
  return code;
}

}  // namespace faultline
