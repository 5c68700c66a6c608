// A run faultd serves for faultctl (POST /v1/runs): a typed packet experiment
// (the JSON of userspace/ops/experiment.h, read with the packet family's
// reader) and how this invocation prints it. Both sides of the request are
// here: faultctl writes it with served_run_request(), faultd reads it with
// served_run_from_json() and runs it with run_served().
//
//   {"experiment": {"kind": "loss", "target": "10.0.0.2", "percent": 30, ...},
//    "attach": "tcx"|"tc",           how the programs attach (absent: the best the kernel has)
//    "json": bool,                   JSON lines on stdout (--json)
//    "redact_patterns": [REGEX...],  --redact-pattern
//    "no_redact": bool,              --no-redact
//    "terminal": bool}               whether the client's stderr is a terminal
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/redact.h"
#include "base/result.h"
#include "loader/netfault_attachments.h"
#include "userspace/faults/packet/spec.h"
#include "userspace/ops/experiment.h"

namespace faultline {

class RunStreams;

struct ServedRun {
  FaultSpec spec;
  GuardrailOptions guardrails;
  AttachMode attach = AttachMode::Auto;
  bool json = false;
  Redactor redactor;
};

// The request faultctl sends for a packet experiment (the typed JSON,
// experiment_to_json() of what its flags parsed to).
[[nodiscard]] nlohmann::json served_run_request(nlohmann::json experiment, AttachMode attach, bool json,
                                                const Redactor& redactor, bool terminal);

// Reads and checks a request. A bad experiment is refused with the reader's
// error, which names the field and its flag ("spec.percent (--percent): must
// be within 0-100"); a run faultd does not serve (another family, a
// hypothesis) names why. Bad input either way.
[[nodiscard]] Result<ServedRun> served_run_from_json(const nlohmann::json& body);

// Plans the fault and runs it guarded, printing what `faultctl run` prints;
// the exit code.
[[nodiscard]] int run_served(const ServedRun& run, RunStreams& streams);

}  // namespace faultline
