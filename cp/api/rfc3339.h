// UTC timestamps as the guard writes them ("2025-06-01T12:00:00.123Z") and
// the API takes them (since, until, expires_at), to and from milliseconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace faultline::cp {

// "YYYY-MM-DDTHH:MM:SS[.fff...]Z" or with a "+HH:MM"/"-HH:MM" offset, to
// milliseconds since the epoch; none when it is not one.
[[nodiscard]] std::optional<int64_t> parse_rfc3339_ms(std::string_view text);
// Milliseconds since the epoch as "YYYY-MM-DDTHH:MM:SS.fffZ".
[[nodiscard]] std::string rfc3339_from_ms(int64_t ms);
// A time the API takes: milliseconds since the epoch (digits) or RFC 3339.
[[nodiscard]] std::optional<int64_t> parse_api_time(std::string_view text);

}  // namespace faultline::cp
