// How a run ended, and the exit code that says so. faultctl and faultd both map
// a RunResult through exit_code(), so the CLI, the daemon's API and the "ended"
// JSON line agree (the contract is base/exit_code.h).
#pragma once

#include <optional>
#include <string>

#include "base/exit_code.h"

namespace faultline {

enum class RunOutcome {
  Completed,           // ran to its end (or its wrapped command exited)
  Guardrail,           // a guardrail was breached, or the steady state was already outside it
  Interrupted,         // SIGINT, SIGTERM or SIGHUP
  AbortedFromOutside,  // faultctl abort, or the kill switch
  Failed,              // could not apply, or broke by itself
  BadInput,            // refused before anything was applied
};
[[nodiscard]] const char* outcome_name(RunOutcome o);  // "completed", "guardrail", ...

// Untested: the run completed, but the fault touched nothing (a packet fault
// that matched no packet), so the guardrail's and the SLO's figures say nothing
// about it.
enum class HypothesisVerdict { Held, Refuted, Aborted, Untested };
[[nodiscard]] const char* hypothesis_verdict_name(HypothesisVerdict v);

struct RunResult {
  RunOutcome outcome = RunOutcome::Completed;
  std::string detail;                        // why, for people ("health check failed: HTTP 503")
  std::optional<HypothesisVerdict> verdict;  // with --record/--steady-state
  std::optional<int> command_exit;           // a wrapped command's own exit code
  // Set when the fault touched nothing while it was on: why, for people ("the
  // fault matched no packet for its whole duration"). The exit code stays that
  // of the outcome; the verdict becomes untested.
  std::optional<std::string> untested;
};

// 0 completed (a wrapped command's own code; also when the fault touched
// nothing: the verdict says untested), 1 failed, interrupted or aborted
// (a wrapped command's own code: it ran on), 2 bad input, 7 guardrail, 8 refuted.
[[nodiscard]] int exit_code(const RunResult& r);

}  // namespace faultline
