// Exit codes of faultctl, the documented contract for CI gates (docs/experiments.md).
// The library returns outcomes; ctl/exit_code.h maps them to these in one place.
#pragma once

namespace faultline {

enum ExitCode : int {
  kExitCompleted = 0,
  kExitFailure = 1,    // could not apply, interrupted, or aborted from outside
  kExitBadInput = 2,   // nothing was applied
  kExitGuardrail = 7,  // aborted because a guardrail was breached (or the steady state was outside it)
  kExitRefuted = 8,    // ran to the end, and the recorded hypothesis (--slo) was refuted
};

}  // namespace faultline
