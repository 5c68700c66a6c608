#include "userspace/run/outcome.h"

namespace faultline {

const char* outcome_name(RunOutcome o) {
  switch (o) {
    case RunOutcome::Completed:
      return "completed";
    case RunOutcome::Guardrail:
      return "guardrail";
    case RunOutcome::Interrupted:
      return "interrupted";
    case RunOutcome::AbortedFromOutside:
      return "aborted";
    case RunOutcome::Failed:
      return "failed";
    case RunOutcome::BadInput:
      return "bad input";
  }
  return "failed";
}

const char* hypothesis_verdict_name(HypothesisVerdict v) {
  switch (v) {
    case HypothesisVerdict::Held:
      return "held";
    case HypothesisVerdict::Refuted:
      return "refuted";
    case HypothesisVerdict::Aborted:
      return "aborted";
    case HypothesisVerdict::Untested:
      return "untested";
  }
  return "aborted";
}

int exit_code(const RunResult& r) {
  switch (r.outcome) {
    case RunOutcome::BadInput:
      return kExitBadInput;
    case RunOutcome::Guardrail:
      return kExitGuardrail;
    case RunOutcome::Failed:
      return kExitFailure;
    case RunOutcome::Interrupted:
    case RunOutcome::AbortedFromOutside:
      return r.command_exit.value_or(kExitFailure);
    case RunOutcome::Completed:
      if (r.verdict == HypothesisVerdict::Refuted) return kExitRefuted;
      return r.command_exit.value_or(kExitCompleted);
  }
  return kExitFailure;
}

}  // namespace faultline
