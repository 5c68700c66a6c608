// RFC 3339 by hand: strptime would take the local zone and more forms than
// the guard writes; this takes exactly the UTC forms, with an offset allowed.
#include "cp/api/rfc3339.h"

#include <cstdio>
#include <ctime>

namespace faultline::cp {
namespace rfc3339_detail {

// The number of `n` digits at `at`; none unless they are all digits.
std::optional<int> digits(std::string_view s, size_t at, size_t n) {
  if (at + n > s.size()) return std::nullopt;
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

}  // namespace rfc3339_detail

std::optional<int64_t> parse_rfc3339_ms(std::string_view s) {
  using rfc3339_detail::digits;
  auto year = digits(s, 0, 4), month = digits(s, 5, 2), day = digits(s, 8, 2);
  auto hour = digits(s, 11, 2), minute = digits(s, 14, 2), second = digits(s, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || s[4] != '-' || s[7] != '-' ||
      (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':')
    return std::nullopt;
  if (*month < 1 || *month > 12 || *day < 1 || *day > 31 || *hour > 23 || *minute > 59 || *second > 60)
    return std::nullopt;
  size_t at = 19;
  int64_t ms = 0;
  if (at < s.size() && s[at] == '.') {
    size_t n = 0;
    for (++at; at < s.size() && s[at] >= '0' && s[at] <= '9'; ++at, ++n)
      if (n < 3) ms = ms * 10 + (s[at] - '0');
    if (n == 0) return std::nullopt;
    for (; n < 3; ++n) ms *= 10;
  }
  int64_t offset_min = 0;
  if (at < s.size() && (s[at] == 'Z' || s[at] == 'z')) {
    ++at;
  } else if (at < s.size() && (s[at] == '+' || s[at] == '-')) {
    auto oh = digits(s, at + 1, 2), om = digits(s, at + 4, 2);
    if (!oh || !om || s[at + 3] != ':' || *oh > 23 || *om > 59) return std::nullopt;
    offset_min = (s[at] == '+' ? 1 : -1) * (*oh * 60 + *om);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != s.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = *second;
  const time_t t = ::timegm(&tm);
  return (static_cast<int64_t>(t) - offset_min * 60) * 1000 + ms;
}

std::string rfc3339_from_ms(int64_t ms) {
  const time_t t = static_cast<time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

std::optional<int64_t> parse_api_time(std::string_view s) {
  if (!s.empty() && s.size() <= 15 && s.find_first_not_of("0123456789") == std::string_view::npos)
    return std::stoll(std::string(s));
  return parse_rfc3339_ms(s);
}

}  // namespace faultline::cp
