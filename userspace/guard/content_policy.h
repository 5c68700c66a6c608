// --content-policy FILE: the operator's own patterns, compiled into the DLP
// engine's database. One rule a line: `label: literal` (case-insensitive) or
// `label: re:REGEX` (Hyperscan's syntax); `#` starts a comment line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace faultline {

struct ContentRule {
  std::string label;
  std::string pattern;  // the literal, or the regex without "re:"
  bool regex = false;
  std::string file;  // where it was written, for errors
  size_t line = 0;
};

// The rules of a file's text; the first bad line is an error "FILE:LINE: why".
// Regexes are checked by Hyperscan when the engine is built (DlpEngine::build).
[[nodiscard]] Result<std::vector<ContentRule>> parse_content_policy(std::string_view text, const std::string& file);
[[nodiscard]] Result<std::vector<ContentRule>> read_content_policy(const std::string& file);

}  // namespace faultline
