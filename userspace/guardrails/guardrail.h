// What every guardrail is to a run: a signal read at its own interval, whose
// reading says healthy or not. Any unhealthy reading ends the fault (exit 7).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

// One reading of one or more guardrail signals. Generic on purpose: the HTTP
// probe fills latency_ms and status, a kernel signal its "<signal>_per_s" rate;
// records keep readings as their time series.
struct GuardrailReading {
  uint64_t t_ns = 0;  // CLOCK_BOOTTIME
  bool healthy = true;
  std::map<std::string, double> values;
  std::string problem;  // why unhealthy: "timeout after 500ms", "tcp_retransmits at 4/s ..."
};

// Folds b into a: the values of both; unhealthy if either is, with both problems.
void merge_reading(GuardrailReading& a, const GuardrailReading& b);

class Guardrail {
 public:
  virtual ~Guardrail() = default;

  // "health check", "kernel signal": how a breach names its cause.
  [[nodiscard]] virtual std::string name() const = 0;
  // How often a run reads it.
  [[nodiscard]] virtual uint64_t interval_ns() const = 0;
  // How often a record keeps a reading of it during the fault.
  [[nodiscard]] virtual uint64_t record_interval_ns() const { return interval_ns(); }
  // Starts whatever counts in the background (the kernel signal loads its
  // programs), so that the first reading covers a window before the fault.
  [[nodiscard]] virtual Status arm() { return {}; }
  [[nodiscard]] virtual GuardrailReading read() = 0;
  // The settings, for --dry-run, the started event and the record. Keys are
  // the guardrail's own: the descriptions of several guardrails are merged.
  [[nodiscard]] virtual nlohmann::json describe() const = 0;
  // The same in one line for people ("GET ... every 2s, healthy if ...").
  [[nodiscard]] virtual std::string summary() const;
  // The JSON line a run prints for a reading ({"event": ...}).
  [[nodiscard]] virtual nlohmann::json event(const GuardrailReading& r) const = 0;
  // The fault has ended: readings after this (a record's after window) no
  // longer change outcome().
  virtual void fault_ended() {}
  // What the guardrail concluded of the fault, kept in a record's verdict.json
  // under "guardrail_outcomes" by name() (the SLO watchdog's outcome and burn
  // rate at the abort); null (the default) when it keeps nothing of its own.
  [[nodiscard]] virtual nlohmann::json outcome() const;
};

using Guardrails = std::vector<std::unique_ptr<Guardrail>>;

// One reading of g, its problem (if any) prefixed with g's name, so that a
// breach, a record's sample and the "ended" line say which guardrail it was.
[[nodiscard]] GuardrailReading read_named(Guardrail& g);

// Every guardrail read once (read_named), merged (healthy and empty with none).
// t_ns is now.
[[nodiscard]] GuardrailReading read_all(const Guardrails& guardrails);

// Every guardrail's describe() merged, with "summary": each one's summary().
[[nodiscard]] nlohmann::json describe_all(const Guardrails& guardrails);

}  // namespace faultline
