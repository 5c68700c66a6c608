// Writing the exposition format by hand: it is a few lines, and the escaping
// rules are the part that matters.
#include "userspace/daemon/metrics_text.h"

namespace faultline {

std::string escape_label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void MetricsText::family(std::string_view name, std::string_view type, std::string_view help) {
  name_ = name;
  out_ += "# HELP " + name_ + " " + escape_help(help) + "\n";
  out_ += "# TYPE " + name_ + " " + std::string(type) + "\n";
}

void MetricsText::sample(const MetricLabels& labels, uint64_t value) {
  out_ += name_;
  if (!labels.empty()) {
    out_ += "{";
    for (size_t i = 0; i < labels.size(); ++i)
      out_ += (i ? "," : "") + labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
    out_ += "}";
  }
  out_ += " " + std::to_string(value) + "\n";
}

}  // namespace faultline
