// The Prometheus exposition text faultd serves, read back by a strict checker of
// the text format 0.0.4: HELP then TYPE once per family before its samples,
// valid names, escaped label values, counters named *_total, no series twice.
#include "userspace/daemon/metrics_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>
#include <string>

#include "userspace/daemon/metrics.h"

namespace {

bool metric_name_ok(const std::string& n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_' || n[0] == ':')) return false;
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':')) return false;
  }
  return true;
}

bool label_name_ok(const std::string& n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return n.rfind("__", 0) != 0;
}

// The first violation, or "" when the text is strictly well formed.
std::string exposition_violation(const std::string& text) {
  if (!text.empty() && text.back() != '\n') return "the text does not end in a newline";
  std::istringstream in(text);
  std::string line, family, type;
  std::set<std::string> families, series;
  bool help_seen = false;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string at = "line " + std::to_string(n) + " '" + line + "': ";
    if (line.rfind("# HELP ", 0) == 0) {
      std::string rest = line.substr(7);
      const size_t sp = rest.find(' ');
      family = rest.substr(0, sp);
      if (!metric_name_ok(family)) return at + "bad metric name";
      if (!families.insert(family).second) return at + "family declared twice";
      const std::string help = sp == std::string::npos ? "" : rest.substr(sp + 1);
      for (size_t i = 0; i < help.size(); ++i) {
        if (help[i] == '\\' && (i + 1 >= help.size() || (help[i + 1] != '\\' && help[i + 1] != 'n')))
          return at + "bad escape in HELP";
        if (help[i] == '\\') ++i;
      }
      help_seen = true;
      type.clear();
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, kind, extra;
      t >> name >> kind >> extra;
      if (!help_seen || name != family) return at + "TYPE without its HELP just before";
      if (kind != "counter" && kind != "gauge") return at + "type other than counter or gauge";
      if (!extra.empty()) return at + "words after the type";
      if (kind == "counter" && name.size() < 6) return at + "counter not named *_total";
      if (kind == "counter" && name.compare(name.size() - 6, 6, "_total") != 0) return at + "counter not named *_total";
      type = kind;
      help_seen = false;
      continue;
    }
    if (line.empty() || line[0] == '#') return at + "stray comment or empty line";
    if (type.empty()) return at + "sample before its family's TYPE";
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    const std::string name = line.substr(0, i);
    if (name != family) return at + "sample of another family than the one declared";
    std::string labels;
    if (i < line.size() && line[i] == '{') {
      ++i;
      std::set<std::string> names;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) return at + "label without '='";
        const std::string ln = line.substr(i, eq - i);
        if (!label_name_ok(ln)) return at + "bad label name '" + ln + "'";
        if (!names.insert(ln).second) return at + "label given twice";
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') return at + "label value not quoted";
        ++i;
        for (;; ++i) {
          if (i >= line.size()) return at + "unterminated label value";
          if (line[i] == '"') break;
          if (line[i] == '\\') {
            if (i + 1 >= line.size() || (line[i + 1] != '\\' && line[i + 1] != '"' && line[i + 1] != 'n'))
              return at + "bad escape in a label value";
            ++i;
          }
        }
        ++i;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return at + "unterminated label set";
      labels = line.substr(name.size(), i + 1 - name.size());
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') return at + "no space before the value";
    const std::string value = line.substr(i + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || std::isnan(v)) return at + "value is not a number";
    if (type == "counter" && v < 0) return at + "negative counter";
    if (!series.insert(name + labels).second) return at + "series given twice";
  }
  if (help_seen) return "a HELP without its TYPE at the end";
  return "";
}

TEST(MetricsText, WritesFamiliesAndEscapesLabelValues) {
  faultline::MetricsText m;
  m.family("faultline_test_events_total", "counter", "Events, with a \\ and a\nnewline in the help");
  m.sample({{"fault", "3"}, {"kind", "loss"}}, 7);
  m.sample({{"fault", "a\"b\\c\nd"}, {"kind", "x"}}, 0);
  m.family("faultline_test_fill", "gauge", "A gauge without labels");
  m.sample({}, 42);
  const std::string& t = m.text();
  EXPECT_EQ(exposition_violation(t), "") << t;
  EXPECT_NE(t.find("# HELP faultline_test_events_total Events, with a \\\\ and a\\nnewline in the help\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("faultline_test_events_total{fault=\"a\\\"b\\\\c\\nd\",kind=\"x\"} 0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nfaultline_test_fill 42\n"), std::string::npos) << t;
}

TEST(MetricsText, TheCheckerRefusesWhatPrometheusWould) {
  EXPECT_NE(exposition_violation("x_total 1\n"), "");                                   // no TYPE
  EXPECT_NE(exposition_violation("# HELP x h\n# TYPE x counter\nx 1\n"), "");           // counter not *_total
  EXPECT_NE(exposition_violation("# HELP x h\n# TYPE x gauge\nx{a=\"\\q\"} 1\n"), "");  // bad escape
  EXPECT_NE(exposition_violation("# HELP x h\n# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"1\"} 2\n"), "");  // twice
  EXPECT_NE(exposition_violation("# HELP x h\n# TYPE x gauge\ny 1\n"), "");                         // another family
  EXPECT_EQ(exposition_violation("# HELP x h\n# TYPE x gauge\nx{a=\"1\",b=\"\\\"\"} 1\n"), "");
}

// What faultd serves on this host now (read only: a scrape changes nothing).
TEST(MetricsText, FaultdsMetricsAreWellFormed) {
  const std::string t = faultline::collect_metrics();
  EXPECT_EQ(exposition_violation(t), "") << t;
  EXPECT_NE(t.find("# TYPE faultline_installed gauge\n"), std::string::npos) << t;
}

}  // namespace
