// The errors of faultctl's flag parsers: a wrong flag is bad input (exit 2), and
// its one-line message names the flag.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace faultline {

[[nodiscard]] inline Error bad(std::string message, SourceLocation loc = SourceLocation::current()) {
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

// A whole number for --FLAG within [min, max]: "--max-injections '-3': expected a
// whole number from 1 to 1000000000". Signs, units, fractions and values past
// max (however many digits) are refused, naming the flag.
[[nodiscard]] inline Result<uint64_t> parse_count_flag(std::string_view flag, const std::string& s, uint64_t min,
                                                       uint64_t max) {
  const std::string range = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return bad("--" + std::string(flag) + " '" + s + "': expected " + range);
  if (s.size() > 19 || std::stoull(s) > max)
    return bad("--" + std::string(flag) + " " + s + ": too large, expected " + range);
  uint64_t v = std::stoull(s);
  if (v < min) return bad("--" + std::string(flag) + " " + s + ": expected " + range);
  return v;
}

// A --seed: any whole number a u64 holds, 0 to 18446744073709551615, in
// decimal. Signs, spaces, fractions and values past 2^64 - 1 are refused.
[[nodiscard]] inline Result<uint64_t> parse_seed_flag(const std::string& s) {
  constexpr const char* range = "a whole number from 0 to 18446744073709551615";
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return bad("--seed '" + s + "': expected " + std::string(range));
  const std::string digits = s.substr(std::min(s.find_first_not_of('0'), s.size() - 1));
  if (digits.size() > 20 || (digits.size() == 20 && digits > "18446744073709551615"))
    return bad("--seed " + s + ": too large, expected " + std::string(range));
  return static_cast<uint64_t>(std::stoull(digits));
}

}  // namespace faultline
