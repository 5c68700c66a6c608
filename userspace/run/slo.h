// Hypothesis thresholds (SLOs), and what a series of guardrail readings says
// about them.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/guardrails/guardrail.h"

namespace faultline {

// The hypothesis threshold: "p99<300ms", "p50<=80ms", "success>99.9%", "success>=99%".
struct Slo {
  enum class Metric { LatencyPercentile, SuccessRate };
  Metric metric = Metric::SuccessRate;
  double percentile = 0;   // 99 for p99
  double threshold = 0;    // milliseconds, or percent
  bool inclusive = false;  // <= or >=
  std::string text;
  [[nodiscard]] nlohmann::json to_json() const;
};
[[nodiscard]] Result<Slo> parse_slo(const std::string& s);

// Nearest-rank percentile of latency_ms. A failed reading (no answer, or a status
// >= 400) counts as infinitely slow: an error is never a fast answer.
[[nodiscard]] std::optional<double> latency_percentile(const std::vector<GuardrailReading>& samples, double p);

struct SignalSummary {
  size_t samples = 0;
  size_t healthy = 0;
  double success_percent = 0;
  std::optional<double> p50_ms, p90_ms, p99_ms, max_ms;  // +inf when failures reach that rank
  [[nodiscard]] nlohmann::json to_json() const;
};
[[nodiscard]] SignalSummary summarize(const std::vector<GuardrailReading>& samples);

struct SloResult {
  std::optional<double> value;  // p99 in ms or success in percent; nullopt with no samples
  bool met = false;
  [[nodiscard]] std::string describe(const Slo& slo) const;  // "p99 412ms (allowed < 300ms)"
};
[[nodiscard]] SloResult evaluate(const Slo& slo, const std::vector<GuardrailReading>& samples);

// A latency in ms for JSON: null when absent, "fail" when a failure reached that rank.
[[nodiscard]] nlohmann::json ms_json(std::optional<double> v);
// The same for people: "-", "fail", "12ms", "1.25ms".
[[nodiscard]] std::string ms_text(std::optional<double> v);
// v with prec decimals.
[[nodiscard]] std::string fixed(double v, int prec);

}  // namespace faultline
