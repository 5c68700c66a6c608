// The errors of faultctl's flag parsers: a wrong flag is bad input (exit 2), and
// its one-line message names the flag.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "userspace/faults/spec_fields.h"

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
// max (however many digits) are refused, naming the flag. The words are the
// experiment readers' too (userspace/faults/spec_fields.h).
[[nodiscard]] inline Result<uint64_t> parse_count_flag(std::string_view flag, const std::string& s, uint64_t min,
                                                       uint64_t max) {
  return with_flag(flag, parse_whole_number(s, min, max), " ");
}

// A --seed: any whole number a u64 holds, 0 to 18446744073709551615, in
// decimal. Signs, spaces, fractions and values past 2^64 - 1 are refused.
[[nodiscard]] inline Result<uint64_t> parse_seed_flag(const std::string& s) {
  return with_flag("seed", parse_seed(s), " ");
}

}  // namespace faultline
