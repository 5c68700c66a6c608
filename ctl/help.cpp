// The EXAMPLES block of faultctl's --help texts.
#include "ctl/help.h"

#include <vector>

namespace faultline {
namespace {

constexpr size_t kWidth = 80;
constexpr std::string_view kIndent = "    ", kContinued = "        ";

// The words of a command line, split at spaces outside quotes (quotes kept).
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  char quote = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || (line[i] == ' ' && quote == 0)) {
      if (i > start) out.push_back(line.substr(start, i - start));
      start = i + 1;
    } else if (line[i] == '\'' || line[i] == '"') {
      quote = quote == 0 ? line[i] : (quote == line[i] ? 0 : quote);
    }
  }
  return out;
}

// What a wrap keeps on one line: a word, a flag with its value, or "--" with the
// command after it.
std::vector<std::string> units(std::string_view command) {
  std::vector<std::string_view> w = words(command);
  std::vector<std::string> out;
  for (size_t i = 0; i < w.size(); ++i) {
    std::string u(w[i]);
    if (w[i] == "--") {
      while (++i < w.size()) u += " " + std::string(w[i]);
    } else if (w[i].starts_with("-") && i + 1 < w.size() && !w[i + 1].starts_with("-")) {
      u += " " + std::string(w[++i]);
    }
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace

std::string with_examples(std::string usage, std::span<const Example> examples) {
  std::string out = std::move(usage);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "\nEXAMPLES:\n";
  for (const auto& e : examples) {
    out += std::string(kIndent) + "# " + std::string(e.what) + "\n";
    std::string line(kIndent);
    bool empty = true;
    for (const std::string& w : units(e.command)) {
      if (!empty && line.size() + 1 + w.size() + 2 > kWidth) {  // 2: room for " \\"
        out += line + " \\\n";
        line = std::string(kContinued);
        empty = true;
      }
      if (!empty) line += ' ';
      line += w;
      empty = false;
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace faultline
