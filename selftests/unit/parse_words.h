// What the flag-parser tests share: words from a line, and a parse outcome that
// is not --help turned back into the arguments or the error.
#pragma once

#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "ctl/command.h"

namespace faultline {

inline std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

template <typename Args>
Result<Args> args_of(Result<Parsed<Args>> r) {
  if (!r) return r.error();
  if (std::holds_alternative<HelpText>(*r)) return make_error(EINVAL, "parsed as --help");
  return std::get<Args>(std::move(*r));
}

}  // namespace faultline
