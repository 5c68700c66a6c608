// Hypothesis thresholds (SLOs) and what a series of guardrail readings says
// about them: percentiles, success rates, summaries.
#include "userspace/run/slo.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/units.h"

namespace faultline {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A failed reading never counts as a fast one.
double latency_of(const GuardrailReading& s) {
  auto l = s.values.find("latency_ms");
  auto st = s.values.find("status");
  if (l == s.values.end()) return kInf;                        // no answer at all
  if (st != s.values.end() && st->second >= 400) return kInf;  // an error answer
  if (!s.healthy && st == s.values.end()) return kInf;         // answered, but not in HTTP
  return l->second;                                            // healthy, or merely slow
}

}  // namespace

std::string fixed(double v, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

std::string ms_text(std::optional<double> v) {
  if (!v) return "-";
  if (std::isinf(*v)) return "fail";
  if (std::fabs(*v - std::round(*v)) < 1e-9) return fixed(*v, 0) + "ms";
  return fixed(*v, *v < 10 ? 2 : 1) + "ms";
}

nlohmann::json ms_json(std::optional<double> v) {
  if (!v) return nullptr;
  if (std::isinf(*v)) return "fail";
  return std::round(*v * 1000) / 1000;
}

nlohmann::json Slo::to_json() const {
  nlohmann::json j{{"text", text}, {"inclusive", inclusive}, {"threshold", threshold}};
  if (metric == Metric::LatencyPercentile) {
    j["metric"] = "latency_percentile";
    j["percentile"] = percentile;
    j["unit"] = "ms";
  } else {
    j["metric"] = "success_rate";
    j["unit"] = "%";
  }
  return j;
}

Result<Slo> parse_slo(const std::string& s) {
  auto bad = [&](const std::string& why) { return make_error(EINVAL, "--slo '" + s + "': " + why); };
  std::string t;
  for (char c : s) {
    if (c != ' ') t.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  auto op_pos = t.find_first_of("<>");
  if (op_pos == std::string::npos || op_pos == 0) return bad("expected like p99<300ms or success>99.9%");
  std::string metric = t.substr(0, op_pos);
  bool less = t[op_pos] == '<';
  bool inclusive = op_pos + 1 < t.size() && t[op_pos + 1] == '=';
  std::string value = t.substr(op_pos + (inclusive ? 2 : 1));
  if (value.empty()) return bad("no threshold after the comparison");
  Slo slo;
  slo.text = s;
  slo.inclusive = inclusive;
  if (metric == "success") {
    if (less) return bad("success is a floor: write success>99.9%");
    if (value.back() != '%') return bad("the success threshold is a percent, like 99.9%");
    auto p = parse_percent(value);
    if (!p) return bad(p.error().message);
    if (*p >= 100 && !inclusive) return bad("success>100% can never hold");
    slo.metric = Slo::Metric::SuccessRate;
    slo.threshold = *p;
    return slo;
  }
  if (metric.size() < 2 || metric[0] != 'p') return bad("the metric is pNN (latency percentile) or success");
  std::string pct = metric.substr(1);
  if (pct.find_first_not_of("0123456789.") != std::string::npos || pct.empty())
    return bad("'" + metric + "' is not a percentile like p99");
  double pv = std::strtod(pct.c_str(), nullptr);
  if (pv <= 0 || pv > 100) return bad("the percentile must be within p1-p100");
  if (!less) return bad("a latency percentile is a ceiling: write " + metric + "<300ms");
  auto d = parse_duration_ns(value);
  if (!d) return bad(d.error().message);
  if (*d == 0) return bad("a latency ceiling of 0 can never hold");
  slo.metric = Slo::Metric::LatencyPercentile;
  slo.percentile = pv;
  slo.threshold = static_cast<double>(*d) / 1e6;
  return slo;
}

std::optional<double> latency_percentile(const std::vector<GuardrailReading>& samples, double p) {
  if (samples.empty()) return std::nullopt;
  std::vector<double> v;
  v.reserve(samples.size());
  for (const auto& s : samples) v.push_back(latency_of(s));
  std::sort(v.begin(), v.end());
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

nlohmann::json SignalSummary::to_json() const {
  return {{"samples", samples},
          {"healthy", healthy},
          {"success_percent", std::round(success_percent * 1000) / 1000},
          {"p50_ms", ms_json(p50_ms)},
          {"p90_ms", ms_json(p90_ms)},
          {"p99_ms", ms_json(p99_ms)},
          {"max_ms", ms_json(max_ms)}};
}

SignalSummary summarize(const std::vector<GuardrailReading>& samples) {
  SignalSummary s;
  s.samples = samples.size();
  for (const auto& x : samples) s.healthy += x.healthy ? 1 : 0;
  s.success_percent =
      samples.empty() ? 0 : 100.0 * static_cast<double>(s.healthy) / static_cast<double>(samples.size());
  s.p50_ms = latency_percentile(samples, 50);
  s.p90_ms = latency_percentile(samples, 90);
  s.p99_ms = latency_percentile(samples, 99);
  s.max_ms = latency_percentile(samples, 100);
  return s;
}

std::string SloResult::describe(const Slo& slo) const {
  std::string allowed = slo.metric == Slo::Metric::LatencyPercentile
                            ? std::string(slo.inclusive ? "<= " : "< ") + ms_text(slo.threshold)
                            : std::string(slo.inclusive ? ">= " : "> ") + fixed(slo.threshold, 3) + "%";
  std::string name = slo.metric == Slo::Metric::LatencyPercentile ? "p" + fixed(slo.percentile, 0) : "success";
  std::string got = !value                                         ? "no readings"
                    : slo.metric == Slo::Metric::LatencyPercentile ? ms_text(*value)
                                                                   : fixed(*value, 3) + "%";
  return name + " " + got + " (hypothesis: " + allowed + ")";
}

SloResult evaluate(const Slo& slo, const std::vector<GuardrailReading>& samples) {
  SloResult r;
  if (samples.empty()) return r;
  if (slo.metric == Slo::Metric::LatencyPercentile) {
    r.value = latency_percentile(samples, slo.percentile);
    r.met = slo.inclusive ? *r.value <= slo.threshold : *r.value < slo.threshold;
  } else {
    r.value = summarize(samples).success_percent;
    r.met = slo.inclusive ? *r.value >= slo.threshold : *r.value > slo.threshold;
  }
  return r;
}

}  // namespace faultline
