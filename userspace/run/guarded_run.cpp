// The guarded run loop. It ticks every 100 ms: a guardrail is read when its
// interval is due, a breach ends the fault before anything else is done (not even
// printing), the fault is asked whether it is still on (aborts from outside and
// faults that broke by themselves surface here), and a status line goes out
// once a second (on a terminal; every 5 s to a file, so logs stay readable).
#include "userspace/run/guarded_run.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <ostream>
#include <vector>

#include "base/clock.h"
#include "base/units.h"
#include "userspace/run/redaction.h"
#include "userspace/run/stop_signals.h"
#include "userspace/state/kill_switch.h"

namespace faultline {
namespace {

constexpr uint64_t kTickMs = 100;
constexpr uint64_t kStatusNs = 1'000'000'000ULL;
constexpr uint64_t kStatusFileEveryS = 5;

const char* signal_text(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP"; }

// Packet fault ids are numbers in JSON ({"id": 3}), as `faultctl status` has
// always shown them; resource and syscall ids are strings ("r7", "s2").
nlohmann::json id_json(const std::string& id) {
  if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos) return std::stoull(id);
  return id;
}

void merge_fields(nlohmann::json& into, const nlohmann::json& fields) {
  if (fields.is_object()) into.update(fields);
}

class Printer {
 public:
  Printer(const RunOptions& o, std::ostream& out, std::ostream& err, bool command)
      : json_(o.json),
        who_(o.who),
        redactor_(o.redactor),
        out_(out),
        err_(err),
        info_(command ? err : out),
        tty_(!o.json && o.terminal.value_or(::isatty(STDERR_FILENO) != 0)) {}

  void emit(const nlohmann::json& j) const { out_ << redact_json(redactor_, j).dump() << std::endl; }
  [[nodiscard]] bool json() const { return json_; }
  // A line for people, on stdout (stderr when a wrapped command owns stdout).
  void say(const std::string& line) const { info_ << redactor_.text(line) << std::endl; }
  void error(const std::string& what) const { err_ << who_ << ": " << redactor_.text(what) << "\n"; }

  // Called once a second: a terminal line rewritten in place, or to a file
  // every kStatusFileEveryS-th call (the first included).
  void status(const std::string& line) {
    if (tty_) {
      err_ << "\r\033[K" << redactor_.text(line) << std::flush;
      dirty_ = true;
    } else if (calls_++ % kStatusFileEveryS == 0) {
      err_ << redactor_.text(line) << "\n";
    }
  }
  void clear_status() {
    if (dirty_) err_ << "\r\033[K" << std::flush;
    dirty_ = false;
  }

 private:
  bool json_;
  std::string who_;
  const Redactor& redactor_;
  std::ostream& out_;
  std::ostream& err_;
  std::ostream& info_;
  bool tty_;
  bool dirty_ = false;
  uint64_t calls_ = 0;
};

struct Due {
  Guardrail* g;
  uint64_t next_ns;
  GuardrailReading last;
};

}  // namespace

RunResult guarded_run(RunnableFault& fault, Guardrails& guardrails, const RunOptions& opts, std::ostream& out,
                      std::ostream& err) {
  Printer p(opts, out, err, fault.wraps_command());
  RunResult result;
  auto fail = [&](RunOutcome o, const std::string& detail) {
    p.error(detail);
    result.outcome = o;
    result.detail = detail;
    return result;
  };

  if (opts.dry_run) {
    if (p.json()) {
      nlohmann::json j = fault.plan();
      j["dry_run"] = true;
      if (!guardrails.empty()) j["guardrail"] = describe_all(guardrails);
      if (opts.record)
        j["record"] = {{"dir", opts.record->dir}, {"steady_state", format_duration(opts.record->steady_state_ns)}};
      p.emit(j);
    } else {
      out << opts.redactor.text(fault.dry_run_text()) << "nothing was changed.\n";
    }
    return result;
  }
  if (auto why = fault_start_refused()) return fail(RunOutcome::BadInput, *why);
  if (opts.record && guardrails.empty())
    return fail(
        RunOutcome::BadInput,
        "--record and --steady-state need a guardrail signal (--health-url, --kernel-signal or --prometheus-url)");

  // Guardrails count from before the fault (and the steady state), so that the
  // first window a rate is judged on is not empty.
  for (auto& g : guardrails) {
    if (auto st = g->arm(); !st) return fail(RunOutcome::Failed, st.error().describe());
  }

  std::optional<StopSignals> own_signals;
  StopSource& signals = opts.stop != nullptr ? *opts.stop : own_signals.emplace(true);
  auto stop = [&] { return signals.pending() != 0; };
  std::optional<RecordedRun> recorded;
  if (opts.record) {
    uint64_t interval = UINT64_MAX;
    for (const auto& g : guardrails) interval = std::min(interval, g->record_interval_ns());
    recorded.emplace(
        *opts.record, [&] { return read_all(guardrails); }, interval, describe_all(guardrails), out, opts.json);
    auto go = recorded->before_fault(fault.plan(), stop);
    if (!go) return fail(RunOutcome::Failed, go.error().describe());
    if (!*go) return fail(RunOutcome::Guardrail, "refusing to inject: " + recorded->refusal());
  }

  auto started = fault.apply();
  if (!started) {
    const Error& e = started.error();
    if (recorded) (void)recorded->after_fault(RunOutcome::Failed, e.describe(), [] { return true; });
    return fail(e.bad_input ? RunOutcome::BadInput : RunOutcome::Failed, e.describe());
  }
  if (recorded) recorded->fault_started();
  // The guardrails as armed: a kernel signal says here which source it counts from.
  if (p.json()) {
    nlohmann::json j = started->event;
    j["event"] = "started";
    j["id"] = id_json(started->id);
    if (!guardrails.empty()) j["guardrail"] = describe_all(guardrails);
    p.emit(j);
  } else {
    p.say(started->text);
    for (const auto& g : guardrails) p.say("guardrail: " + g->summary());
  }

  const uint64_t t0 = boottime_ns();
  std::vector<Due> due;
  for (auto& g : guardrails) due.push_back({g.get(), t0 + g->interval_ns(), {}});
  uint64_t record_interval = UINT64_MAX;
  for (const auto& g : guardrails) record_interval = std::min(record_interval, g->record_interval_ns());
  uint64_t next_record = t0 + record_interval;
  uint64_t next_status = t0;

  std::optional<FaultEnding> ending;
  std::string breached_by;  // the guardrail that ended the fault, if one did
  bool ended = false;       // the fault is off; with a wrapped command, the run waits for it
  Status end_status;
  auto end_now = [&](std::string_view reason) {
    if (!ended) end_status = fault.end(reason);
    ended = true;
  };

  // A fault around a wrapped command that ends before the command (an abort, a
  // breach, its expiry) says so at once; the run then waits for the command.
  auto early_end = [&](const FaultEnding& e) {
    end_now(outcome_name(e.outcome));
    if (p.json()) {
      nlohmann::json j{{"event", "fault_ended"}, {"id", id_json(started->id)}, {"reason", outcome_name(e.outcome)}};
      if (!e.detail.empty()) j["detail"] = e.detail;
      p.emit(j);
    } else {
      p.say("fault " + started->id + " ended (" + outcome_name(e.outcome) + (e.detail.empty() ? "" : ": " + e.detail) +
            "); the command runs on");
    }
  };

  for (;;) {
    const uint64_t now = boottime_ns();
    if (!ended && started->until_command_exits && now >= started->expires_ns) {
      ending = FaultEnding{RunOutcome::Completed, "", std::nullopt};
      early_end(*ending);
    }
    if (!ended && !started->until_command_exits && now >= started->expires_ns) {
      ending = FaultEnding{RunOutcome::Completed, "", std::nullopt};
      break;
    }
    if (int sig = signals.pending(); sig != 0) {
      if (fault.forward_signal(sig)) {
        (void)signals.take();
      } else if (!ending) {
        ending = FaultEnding{RunOutcome::Interrupted, std::string("by ") + signal_text(sig), std::nullopt};
        break;
      }
    }
    // The kill file ends every fault of every kind within a tick, wherever it
    // was started from; a wrapped command runs on.
    if (!ended && kill_file_present()) {
      FaultEnding k{RunOutcome::AbortedFromOutside, "ended by the kill file " + kill_file_path(), std::nullopt};
      if (!started->until_command_exits) {
        end_now("kill file");
        ending = k;
        break;
      }
      if (!ending) ending = k;
      early_end(k);
    }
    if (auto e = fault.check()) {
      // With a wrapped command, an abort from outside ends the fault and the
      // command runs on: the run ends when it exits, with its exit code.
      if (e->command_exit) {
        result.command_exit = e->command_exit;
        if (!ending) ending = e;
        break;
      }
      if (!ending) ending = e;
      if (!started->until_command_exits) break;
      if (!ended) early_end(*e);
    }
    bool record_now = recorded && !ended && now >= next_record;
    for (auto& d : due) {
      if (ended || now < d.next_ns) continue;
      d.last = read_named(*d.g);
      if (p.json()) p.emit(d.g->event(d.last));
      if (!d.last.healthy) {
        end_now("guardrail");  // the fault ends before anything else
        ending = FaultEnding{RunOutcome::Guardrail, d.last.problem, std::nullopt};
        breached_by = d.g->name();
        record_now = recorded.has_value();
        if (started->until_command_exits) early_end(*ending);
      }
      d.next_ns = boottime_ns() + d.g->interval_ns();
    }
    if (record_now) {
      GuardrailReading r;
      for (const auto& d : due) merge_reading(r, d.last);
      r.t_ns = boottime_ns();
      recorded->fault_sample(r);
      next_record = now + record_interval;
    }
    if (ending && !started->until_command_exits) break;
    if (now >= next_status) {
      FaultObservation o = fault.observe();
      const uint64_t left_s = started->expires_ns > now ? (started->expires_ns - now) / 1'000'000'000ULL : 0;
      if (p.json()) {
        nlohmann::json j{{"event", "progress"}, {"id", id_json(started->id)}, {"left_s", left_s}};
        merge_fields(j, o.fields);
        p.emit(j);
      } else {
        std::string when = ended ? "ended, waiting for the command" : std::to_string(left_s) + "s left";
        p.status("[" + started->id + " " + fault.summary() + "] " + when + " | " + o.text);
      }
      next_status = now + kStatusNs;
    }
    sleep_ms(kTickMs);
  }

  FaultObservation last = fault.observe();
  p.clear_status();
  end_now(outcome_name(ending->outcome));
  if (recorded) {
    recorded->fault_ended();
    recorded->fault_counted(last.fields);
  }
  fault.describe_end(end_status.ok(), last);
  result.outcome = ending->outcome;
  result.detail = ending->detail;
  if (!end_status.ok()) {
    p.error("ending fault " + started->id + " failed: " + end_status.error().describe());
    if (result.outcome == RunOutcome::Completed) result.outcome = RunOutcome::Failed;
    if (result.detail.empty()) result.detail = end_status.error().describe();
  }
  // A fault that touched nothing tested nothing: never a quiet "completed".
  result.untested = fault.touched_nothing();
  if (result.untested && result.detail.empty()) result.detail = *result.untested;
  const std::string reason = outcome_name(result.outcome);
  if (p.json()) {
    nlohmann::json j{
        {"event", "ended"}, {"id", id_json(started->id)}, {"reason", reason}, {"exit_code", exit_code(result)}};
    if (!result.detail.empty()) j["detail"] = result.detail;
    if (!breached_by.empty()) j["guardrail"] = breached_by;
    if (result.untested) {
      j["untested"] = true;
      j["warning"] = *result.untested;
    }
    merge_fields(j, last.fields);
    p.emit(j);
  } else {
    p.say("fault " + started->id + " ended (" + reason + (result.detail.empty() ? "" : ": " + result.detail) +
          "): " + last.text);
    if (result.outcome == RunOutcome::Guardrail) p.error("guardrail breached, fault ended: " + result.detail);
  }
  // On stderr in both modes, so neither a --json consumer nor a log reader misses it.
  if (result.untested) p.error("WARNING: UNTESTED: fault " + started->id + ": " + *result.untested);
  for (auto& g : guardrails) g->fault_ended();
  if (recorded) {
    // As of the fault's end: the after window's readings do not change them.
    nlohmann::json outcomes = nlohmann::json::object();
    for (const auto& g : guardrails) {
      if (auto o = g->outcome(); !o.is_null()) outcomes[g->name()] = std::move(o);
    }
    recorded->guardrail_outcomes(std::move(outcomes));
    result.verdict =
        recorded->after_fault(result.outcome, result.detail.empty() ? reason : result.detail, stop, result.untested);
  }
  return result;
}

}  // namespace faultline
