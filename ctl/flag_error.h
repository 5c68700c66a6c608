// The errors of faultctl's flag parsers: a wrong flag is bad input (exit 2), and
// its one-line message names the flag.
#pragma once

#include <cerrno>
#include <source_location>
#include <string>
#include <string_view>

#include "base/result.h"

namespace faultline {

[[nodiscard]] inline Error bad(std::string message, std::source_location loc = std::source_location::current()) {
  return input_error(EINVAL, std::move(message), loc);
}

// A value parser's error, prefixed with the flag it read: "--duration: '30x' has an
// unknown unit". A parser whose messages begin with the value itself reads better
// with separator " ": "--duration '30x' has an unknown unit".
template <typename T>
[[nodiscard]] Result<T> with_flag(std::string_view flag, Result<T> r, std::string_view separator = ": ") {
  if (r) return r;
  const int err = r.error().err != 0 ? r.error().err : EINVAL;
  return input_error(err, "--" + std::string(flag) + std::string(separator) + r.error().message);
}

}  // namespace faultline
