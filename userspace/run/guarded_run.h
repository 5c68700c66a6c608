// The one loop every fault runs under: apply, watch the guardrails, show
// progress, end on time, on a breach, on a signal or on an abort from outside,
// and write the record.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "base/redact.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/run/outcome.h"
#include "userspace/run/record.h"
#include "userspace/run/runnable_fault.h"
#include "userspace/run/stop_signals.h"

namespace faultline {

struct RunOptions {
  std::optional<RecordOptions> record;  // --steady-state, --hypothesis, --record, --slo
  bool json = false;                    // JSON lines on stdout
  bool dry_run = false;
  std::string who = "faultctl run";  // prefixes error lines
  Redactor redactor;                 // every line printed goes through it
  // Stop signals from elsewhere (faultd: the client's); null: this process's
  // SIGINT, SIGTERM and SIGHUP, handled for the length of the run.
  StopSource* stop = nullptr;
  // Whether status lines are rewritten in place (a terminal); unset: whether
  // this process's stderr is a terminal.
  std::optional<bool> terminal;
};

// Where a run prints and hears its stop signals: this process's stdout, stderr
// and signals for faultctl; a client's connection for a run faultd serves.
struct RunIo {
  std::ostream& out;
  std::ostream& err;
  StopSource* stop = nullptr;    // null: this process's signals
  std::optional<bool> terminal;  // unset: whether our stderr is a terminal
};

// Runs the fault to its end under the guardrails and returns how it ended.
// SIGINT, SIGTERM and SIGHUP (or what opts.stop reports) end the fault first
// (or go to a wrapped command).
[[nodiscard]] RunResult guarded_run(RunnableFault& fault, Guardrails& guardrails, const RunOptions& opts,
                                    std::ostream& out, std::ostream& err);

}  // namespace faultline
