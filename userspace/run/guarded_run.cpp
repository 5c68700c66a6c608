// The guarded run, as named steps: refuse or arm, the steady state, apply,
// watch, finish. Watching ticks every 100 ms: a guardrail is read when its
// interval is due, a breach ends the fault before anything else is done (not
// even printing), the fault is asked whether it is still on (aborts from
// outside and faults that broke by themselves surface here), and progress goes
// out once a second. What the run says goes to one RunEvents (run_events.h),
// text or JSON.
#include "userspace/run/guarded_run.h"

#include <signal.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "base/clock.h"
#include "userspace/run/run_events.h"
#include "userspace/run/stop_signals.h"
#include "userspace/state/kill_switch.h"

namespace faultline {
namespace {

constexpr uint64_t kTickMs = 100;
constexpr uint64_t kStatusNs = 1'000'000'000ULL;

const char* signal_text(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP"; }

class GuardedRun {
 public:
  GuardedRun(RunnableFault& fault, Guardrails& guardrails, const RunOptions& opts, std::ostream& out, std::ostream& err)
      : fault_(fault),
        guardrails_(guardrails),
        opts_(opts),
        out_(out),
        events_(make_run_events(opts, out, err, fault.wraps_command())) {}

  RunResult run() {
    if (opts_.dry_run) {
      events_->dry_run(fault_, guardrails_, opts_.record);
      return result_;
    }
    if (!refuse_or_arm() || !steady_state() || !apply()) return result_;
    watch();
    return finish();
  }

 private:
  // Each step returns false when the run ends there; result_ says how.
  bool fail(RunOutcome o, const std::string& detail) {
    events_->error(detail);
    result_.outcome = o;
    result_.detail = detail;
    return false;
  }

  // The kill switch and the flags' combinations refuse the run; the guardrails
  // count from before the fault (and the steady state), so that the first
  // window a rate is judged on is not empty.
  bool refuse_or_arm() {
    if (auto why = fault_start_refused()) return fail(RunOutcome::BadInput, *why);
    if (opts_.record && guardrails_.empty())
      return fail(
          RunOutcome::BadInput,
          "--record and --steady-state need a guardrail signal (--health-url, --kernel-signal or --prometheus-url)");
    for (auto& g : guardrails_) {
      if (auto st = g->arm(); !st) return fail(RunOutcome::Failed, st.error().describe());
    }
    signals_ = opts_.stop != nullptr ? opts_.stop : &own_signals_.emplace(true);
    for (const auto& g : guardrails_) record_interval_ = std::min(record_interval_, g->record_interval_ns());
    return true;
  }

  // With a record: the steady state read before the fault, which may refuse it.
  bool steady_state() {
    if (!opts_.record) return true;
    recorded_.emplace(
        *opts_.record, [&] { return read_all(guardrails_); }, record_interval_, describe_all(guardrails_), out_,
        opts_.json);
    auto go = recorded_->before_fault(fault_.plan(), stop_check());
    if (!go) return fail(RunOutcome::Failed, go.error().describe());
    if (!*go) return fail(RunOutcome::Guardrail, "refusing to inject: " + recorded_->refusal());
    return true;
  }

  // The fault on; the guardrails as armed are shown with it (a kernel signal
  // says here which source it counts from).
  bool apply() {
    auto started = fault_.apply();
    if (!started) {
      const Error& e = started.error();
      if (recorded_) (void)recorded_->after_fault(RunOutcome::Failed, e.describe(), [] { return true; });
      return fail(e.bad_input ? RunOutcome::BadInput : RunOutcome::Failed, e.describe());
    }
    started_ = std::move(*started);
    if (recorded_) recorded_->fault_started();
    events_->started(started_, guardrails_);
    return true;
  }

  // Ticks until the run has an ending.
  void watch() {
    const uint64_t t0 = boottime_ns();
    for (auto& g : guardrails_) due_.push_back({g.get(), t0 + g->interval_ns(), {}});
    next_record_ = t0 + record_interval_;
    next_progress_ = t0;
    while (!tick(boottime_ns())) sleep_ms(kTickMs);
  }

  // One tick; true once the run stops watching.
  bool tick(uint64_t now) {
    const bool wrapped = started_.until_command_exits;
    if (!ended_ && now >= started_.expires_ns) {
      ending_ = FaultEnding{RunOutcome::Completed, "", std::nullopt};
      if (!wrapped) return true;
      end_early(*ending_);
    }
    if (int sig = signals_->pending(); sig != 0) {
      if (fault_.forward_signal(sig)) {
        (void)signals_->take();
      } else if (!ending_) {
        ending_ = FaultEnding{RunOutcome::Interrupted, std::string("by ") + signal_text(sig), std::nullopt};
        return true;
      }
    }
    // The kill file ends every fault of every kind within a tick, wherever it
    // was started from; a wrapped command runs on.
    if (!ended_ && kill_file_present()) {
      FaultEnding k{RunOutcome::AbortedFromOutside, "ended by the kill file " + kill_file_path(), std::nullopt};
      if (!wrapped) {
        end_fault("kill file");
        ending_ = k;
        return true;
      }
      if (!ending_) ending_ = k;
      end_early(k);
    }
    if (auto e = fault_.check()) {
      // With a wrapped command, an abort from outside ends the fault and the
      // command runs on: the run ends when it exits, with its exit code.
      if (e->command_exit) {
        result_.command_exit = e->command_exit;
        if (!ending_) ending_ = e;
        return true;
      }
      if (!ending_) ending_ = e;
      if (!wrapped) return true;
      if (!ended_) end_early(*e);
    }
    read_guardrails(now);
    if (ending_ && !wrapped) return true;
    if (now >= next_progress_) {
      const uint64_t left_s = started_.expires_ns > now ? (started_.expires_ns - now) / 1'000'000'000ULL : 0;
      events_->progress(started_.id, fault_.summary(), left_s, ended_, fault_.observe());
      next_progress_ = now + kStatusNs;
    }
    return false;
  }

  // The guardrails whose interval is due; a breach ends the fault first. With
  // a record, their last readings go into it at its interval.
  void read_guardrails(uint64_t now) {
    bool record_now = recorded_ && !ended_ && now >= next_record_;
    for (auto& d : due_) {
      if (ended_ || now < d.next_ns) continue;
      d.last = read_named(*d.g);
      events_->reading(*d.g, d.last);
      if (!d.last.healthy) {
        end_fault("guardrail");  // the fault ends before anything else
        ending_ = FaultEnding{RunOutcome::Guardrail, d.last.problem, std::nullopt};
        breached_by_ = d.g->name();
        record_now = recorded_.has_value();
        if (started_.until_command_exits) end_early(*ending_);
      }
      d.next_ns = boottime_ns() + d.g->interval_ns();
    }
    if (record_now) {
      GuardrailReading r;
      for (const auto& d : due_) merge_reading(r, d.last);
      r.t_ns = boottime_ns();
      recorded_->fault_sample(r);
      next_record_ = now + record_interval_;
    }
  }

  // Ends the fault once (the run may go on, waiting for a wrapped command).
  void end_fault(std::string_view reason) {
    if (!ended_) end_status_ = fault_.end(reason);
    ended_ = true;
  }

  // A fault around a wrapped command that ends before the command (an abort,
  // a breach, its expiry) says so at once; the run then waits for the command.
  void end_early(const FaultEnding& e) {
    end_fault(outcome_name(e.outcome));
    events_->ended_early(started_.id, e);
  }

  // The fault off, its last counters, the outcome, the record's verdict.
  RunResult finish() {
    FaultObservation last = fault_.observe();
    events_->watch_ended();
    end_fault(outcome_name(ending_->outcome));
    if (recorded_) {
      recorded_->fault_ended();
      recorded_->fault_counted(last.fields);
    }
    fault_.describe_end(end_status_.ok(), last);
    result_.outcome = ending_->outcome;
    result_.detail = ending_->detail;
    if (!end_status_.ok()) {
      events_->error("ending fault " + started_.id + " failed: " + end_status_.error().describe());
      if (result_.outcome == RunOutcome::Completed) result_.outcome = RunOutcome::Failed;
      if (result_.detail.empty()) result_.detail = end_status_.error().describe();
    }
    // A fault that touched nothing tested nothing: never a quiet "completed".
    result_.untested = fault_.touched_nothing();
    if (result_.untested && result_.detail.empty()) result_.detail = *result_.untested;
    events_->ended(started_.id, result_, breached_by_, last);
    // On stderr in both forms, so neither a --json consumer nor a log reader misses it.
    if (result_.untested) events_->error("WARNING: UNTESTED: fault " + started_.id + ": " + *result_.untested);
    for (auto& g : guardrails_) g->fault_ended();
    if (recorded_) {
      // As of the fault's end: the after window's readings do not change them.
      nlohmann::json outcomes = nlohmann::json::object();
      for (const auto& g : guardrails_) {
        if (auto o = g->outcome(); !o.is_null()) outcomes[g->name()] = std::move(o);
      }
      recorded_->guardrail_outcomes(std::move(outcomes));
      const std::string reason = outcome_name(result_.outcome);
      result_.verdict = recorded_->after_fault(result_.outcome, result_.detail.empty() ? reason : result_.detail,
                                               stop_check(), result_.untested);
    }
    return result_;
  }

  RecordedRun::StopCheck stop_check() const {
    return [s = signals_] { return s->pending() != 0; };
  }

  struct Due {
    Guardrail* g;
    uint64_t next_ns;
    GuardrailReading last;
  };

  RunnableFault& fault_;
  Guardrails& guardrails_;
  const RunOptions& opts_;
  std::ostream& out_;
  std::unique_ptr<RunEvents> events_;
  RunResult result_;

  std::optional<StopSignals> own_signals_;
  StopSource* signals_ = nullptr;  // opts.stop, or this process's own
  std::optional<RecordedRun> recorded_;
  uint64_t record_interval_ = UINT64_MAX;
  FaultStart started_;

  std::vector<Due> due_;
  uint64_t next_record_ = 0;
  uint64_t next_progress_ = 0;
  std::optional<FaultEnding> ending_;
  std::string breached_by_;  // the guardrail that ended the fault, if one did
  bool ended_ = false;       // the fault is off; with a wrapped command, the run waits for it
  Status end_status_;
};

}  // namespace

RunResult guarded_run(RunnableFault& fault, Guardrails& guardrails, const RunOptions& opts, std::ostream& out,
                      std::ostream& err) {
  return GuardedRun(fault, guardrails, opts, out, err).run();
}

}  // namespace faultline
