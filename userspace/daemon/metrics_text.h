// The Prometheus text exposition format (version 0.0.4), written: one HELP and
// one TYPE line per family, then its samples, label values escaped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class MetricsText {
 public:
  // Starts a family; type is "counter" or "gauge". A family is started once.
  void family(std::string_view name, std::string_view type, std::string_view help);
  // One sample of the family last started.
  void sample(const MetricLabels& labels, uint64_t value);
  [[nodiscard]] const std::string& text() const { return out_; }

 private:
  std::string out_;
  std::string name_;
};

// A label value with \, " and newline escaped as the format asks.
[[nodiscard]] std::string escape_label_value(std::string_view v);
// HELP text with \ and newline escaped.
[[nodiscard]] std::string escape_help(std::string_view v);

}  // namespace faultline
