// Secrets stay out of records, JSON output and logs: credentials in URLs, query
// parameters and headers named like keys or tokens, KEY=VALUE words whose name
// looks secret, and whatever the operator's own patterns match.
#pragma once

#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace faultline {

inline constexpr std::string_view kRedacted = "[REDACTED]";

class Redactor {
 public:
  // The default rules plus `patterns` (ECMAScript regexes, each match replaced);
  // enabled = false (--no-redact) passes everything through. A pattern that does
  // not compile is bad input naming it.
  [[nodiscard]] static Result<Redactor> make(const std::vector<std::string>& patterns, bool enabled = true);
  Redactor() = default;  // the default rules

  // Free text: a URL, a command line, a header line, a log message.
  [[nodiscard]] std::string text(std::string_view s) const;
  // Whether a name (a header, a JSON key, an environment variable, a query
  // parameter) says its value is a secret: "Authorization", "API_KEY",
  // "db-password", "accessToken"; not "KEYBOARD", "monkey" or "passthrough".
  [[nodiscard]] static bool secret_name(std::string_view name);

  [[nodiscard]] bool enabled() const { return enabled_; }
  [[nodiscard]] const std::vector<std::string>& patterns() const { return sources_; }

 private:
  bool enabled_ = true;
  std::vector<std::string> sources_;
  std::vector<std::regex> extra_;
};

}  // namespace faultline
