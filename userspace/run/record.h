// Experiment records: steady state first, a fingerprinted hypothesis, a time
// series, a verdict. The SLO arithmetic is slo.h; reading a record back is
// record_reader.h.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/redact.h"
#include "base/result.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/run/outcome.h"
#include "userspace/run/slo.h"

namespace faultline {

struct RecordOptions {
  std::string hypothesis;
  std::string dir;               // empty: measure the steady state, write nothing
  uint64_t steady_state_ns = 0;  // 0: no steady-state or after window
  std::optional<Slo> slo;
  std::string command_line;
  Redactor redactor;  // applied to every file of the record
};

// A record folder must be new or empty: a record is never overwritten.
[[nodiscard]] Status check_record_dir(const std::string& dir);

// The three phases of a recorded experiment around any fault, packet or resource.
// The fault's own loop calls the hooks; the signal is whatever the sampler reads.
//
//   before_fault()  steady state for the window; refuses (false) when a reading is
//                   already unhealthy or the SLO is already missed; then writes
//                   hypothesis.json and its SHA-256 before anything is injected
//   fault_sample()  every guardrail reading during the fault, appended and flushed
//   after_fault()   the same window again after the revert, then verdict.json
//                   (untested when the fault touched nothing)
class RecordedRun {
 public:
  using Sampler = std::function<GuardrailReading()>;
  using StopCheck = std::function<bool()>;

  RecordedRun(RecordOptions opts, Sampler sampler, uint64_t interval_ns, nlohmann::json guardrail, std::ostream& out,
              bool json);

  [[nodiscard]] Result<bool> before_fault(const nlohmann::json& spec, const StopCheck& stop);
  void fault_started();
  void fault_sample(const GuardrailReading& s);
  void fault_ended();
  // What the fault counted by its end (its last observation: counters, and a
  // cap's state with when it was reached); kept in verdict.json as "fault_counters".
  void fault_counted(nlohmann::json fields) { fault_counters_ = std::move(fields); }
  // What each guardrail concluded of the fault ({name: Guardrail::outcome()}),
  // as of its end; kept in verdict.json as "guardrail_outcomes".
  void guardrail_outcomes(nlohmann::json outcomes) { guardrail_outcomes_ = std::move(outcomes); }
  [[nodiscard]] HypothesisVerdict after_fault(RunOutcome outcome, const std::string& detail, const StopCheck& stop,
                                              const std::optional<std::string>& untested = std::nullopt);

  [[nodiscard]] const RecordOptions& options() const { return opts_; }
  // Why before_fault() refused to start ("" when it did not).
  [[nodiscard]] const std::string& refusal() const { return refusal_; }

 private:
  std::vector<GuardrailReading> sample_window(const std::string& phase, const StopCheck& stop);
  void append(const std::string& phase, const GuardrailReading& s);
  void emit(const nlohmann::json& event, const std::string& text);
  HypothesisVerdict write_verdict(HypothesisVerdict v, const std::string& reason, RunOutcome outcome,
                                  const std::string& detail, const std::optional<std::string>& untested = std::nullopt);

  RecordOptions opts_;
  Sampler sampler_;
  uint64_t interval_ns_;
  nlohmann::json guardrail_;
  std::ostream& out_;
  bool json_;
  uint64_t origin_ns_ = 0;  // t = 0 of the time series
  uint64_t fault_start_ns_ = 0, fault_end_ns_ = 0;
  double fault_start_wall_ = 0, fault_end_wall_ = 0;
  nlohmann::json fault_counters_, guardrail_outcomes_;
  std::string hypothesis_sha_;
  std::string refusal_;
  UniqueFd samples_fd_;
  std::vector<GuardrailReading> steady_, fault_, after_;
};

}  // namespace faultline
