// What a guarded run says, as events, and its two readers: lines for people
// and JSON lines (--json). The run produces each event once, in one place
// (guarded_run.cpp); a RunEvents decides what it looks like. Error lines
// ("WHO: what") go to stderr in both forms, so neither a --json consumer nor a
// log reader misses them. Every line goes through the run's Redactor.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "userspace/guardrails/guardrail.h"
#include "userspace/run/guarded_run.h"
#include "userspace/run/outcome.h"
#include "userspace/run/runnable_fault.h"

namespace faultline {

class RunEvents {
 public:
  virtual ~RunEvents() = default;

  // --dry-run: what would be applied, guarded and recorded; nothing was.
  virtual void dry_run(const RunnableFault& fault, const Guardrails& guardrails,
                       const std::optional<RecordOptions>& record) = 0;
  // The fault is on, under these guardrails as armed.
  virtual void started(const FaultStart& start, const Guardrails& guardrails) = 0;
  // A guardrail was read.
  virtual void reading(const Guardrail& g, const GuardrailReading& r) = 0;
  // The fault around a wrapped command ended before the command did.
  virtual void ended_early(const std::string& id, const FaultEnding& e) = 0;
  // Once a second: the time left (or that the fault ended and the run waits
  // for its command) and the fault's counters.
  virtual void progress(const std::string& id, const std::string& summary, uint64_t left_s, bool ended,
                        const FaultObservation& o) = 0;
  // The run stopped watching the fault (a status line on a terminal is cleared).
  virtual void watch_ended() = 0;
  // The run's end; breached_by names the guardrail that ended it, if one did.
  virtual void ended(const std::string& id, const RunResult& r, const std::string& breached_by,
                     const FaultObservation& last) = 0;
  // "WHO: what" on stderr.
  virtual void error(const std::string& what) = 0;
};

// The reader o asks for (o.json), printing to out and err; command: a wrapped
// command owns stdout, so the lines for people go to stderr.
[[nodiscard]] std::unique_ptr<RunEvents> make_run_events(const RunOptions& o, std::ostream& out, std::ostream& err,
                                                         bool command);

}  // namespace faultline
