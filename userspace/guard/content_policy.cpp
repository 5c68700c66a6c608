// The content policy's lines: `label: literal`, `label: re:REGEX`, comments.
#include "userspace/guard/content_policy.h"

#include <cctype>

#include "base/files.h"

namespace faultline {
namespace content_policy_detail {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool label_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; }

}  // namespace content_policy_detail

Result<std::vector<ContentRule>> parse_content_policy(std::string_view text, const std::string& file) {
  using content_policy_detail::label_char;
  using content_policy_detail::trim;
  std::vector<ContentRule> rules;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    const std::string at = file + ":" + std::to_string(line_no) + ": ";
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return input_error(0, at + "expected 'label: literal' or 'label: re:REGEX'");
    const std::string_view label = trim(line.substr(0, colon));
    if (label.empty()) return input_error(0, at + "empty label before ':'");
    for (char c : label)
      if (!label_char(c))
        return input_error(0, at + "label '" + std::string(label) + "': letters, digits, '_', '-' and '.' only");
    std::string_view pattern = trim(line.substr(colon + 1));
    ContentRule r;
    r.label = std::string(label);
    r.file = file;
    r.line = line_no;
    if (pattern.starts_with("re:")) {
      r.regex = true;
      pattern.remove_prefix(3);
    }
    if (pattern.empty()) return input_error(0, at + "label '" + r.label + "' has an empty pattern");
    if (pattern.find('\0') != std::string_view::npos) return input_error(0, at + "a NUL byte in the pattern");
    r.pattern = std::string(pattern);
    rules.push_back(std::move(r));
  }
  if (rules.empty()) return input_error(0, file + ": no rule (lines 'label: literal' or 'label: re:REGEX')");
  return rules;
}

Result<std::vector<ContentRule>> read_content_policy(const std::string& file) {
  auto text = read_text_file(file);
  if (!text) return as_bad_input(text.error());
  return parse_content_policy(*text, file);
}

}  // namespace faultline
