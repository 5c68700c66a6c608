// Value parsers with messages that say what was expected.
#include "base/units.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace faultline {
namespace {

// Splits "1.5ms" into 1.5 and "ms"; fails on anything but digits, one dot, then letters.
bool split_number(const std::string& s, double& value, std::string& unit) {
  size_t i = 0;
  bool dot = false, digit = false;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || (s[i] == '.' && !dot))) {
    dot |= s[i] == '.';
    digit |= s[i] != '.';
    ++i;
  }
  if (!digit) return false;
  try {
    value = std::stod(s.substr(0, i));
  } catch (...) {
    return false;
  }
  unit = s.substr(i);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::isfinite(value);
}

}  // namespace

Result<uint64_t> parse_duration_ns(const std::string& s) {
  double v = 0;
  std::string unit;
  if (!split_number(s, v, unit)) return make_error(EINVAL, "'" + s + "' is not a duration (like 30s, 500ms, 2m)");
  double scale = 0;
  if (unit == "ns")
    scale = 1;
  else if (unit == "us")
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  else if (unit == "m")
    scale = 60e9;
  else if (unit == "h")
    scale = 3600e9;
  else if (unit.empty())
    return make_error(EINVAL, "'" + s + "' has no unit (write 30s, 500ms, 2m or 1h)");
  else
    return make_error(EINVAL, "'" + s + "' has an unknown unit '" + unit + "' (ns, us, ms, s, m, h)");
  double ns = v * scale;
  if (ns > 1e18) return make_error(ERANGE, "'" + s + "' is too long");
  return static_cast<uint64_t>(std::llround(ns));
}

std::string format_duration(uint64_t ns) {
  std::ostringstream o;
  if (ns >= 60'000'000'000ULL && ns % 60'000'000'000ULL == 0)
    o << ns / 60'000'000'000ULL << "m";
  else if (ns >= 1'000'000'000ULL)
    o << static_cast<double>(ns) / 1e9 << "s";
  else if (ns >= 1'000'000ULL)
    o << static_cast<double>(ns) / 1e6 << "ms";
  else
    o << static_cast<double>(ns) / 1e3 << "us";
  return o.str();
}

Result<double> parse_percent(const std::string& s) {
  std::string t = s;
  if (!t.empty() && t.back() == '%') t.pop_back();
  double v = 0;
  std::string unit;
  if (!split_number(t, v, unit) || !unit.empty()) return make_error(EINVAL, "'" + s + "' is not a percentage (0-100)");
  if (v < 0 || v > 100) return make_error(ERANGE, "'" + s + "' is outside 0-100");
  return v;
}

uint32_t percent_to_prob(double percent) {
  if (percent >= 100.0) return 0xFFFFFFFFU;
  if (percent <= 0.0) return 0;
  return static_cast<uint32_t>(std::llround(percent / 100.0 * 4294967295.0));
}

Result<uint64_t> parse_rate_bps(const std::string& s) {
  double v = 0;
  std::string unit;
  if (!split_number(s, v, unit)) return make_error(EINVAL, "'" + s + "' is not a rate (like 10mbit, 1gbit, 500kbit)");
  double bits = 0;
  if (unit == "bit")
    bits = 1;
  else if (unit == "kbit")
    bits = 1e3;
  else if (unit == "mbit")
    bits = 1e6;
  else if (unit == "gbit")
    bits = 1e9;
  else if (unit == "bps")
    bits = 8;
  else if (unit == "kbps")
    bits = 8e3;
  else if (unit == "mbps")
    bits = 8e6;
  else if (unit == "gbps")
    bits = 8e9;
  else
    return make_error(EINVAL,
                      "'" + s + "' needs a unit: bit, kbit, mbit, gbit (bits/s) or bps, kbps, mbps, gbps (bytes/s)");
  double r = v * bits;
  if (r < kMinRateBps) return make_error(ERANGE, "'" + s + "' is below the minimum of 8kbit");
  if (r > kMaxRateBps) return make_error(ERANGE, "'" + s + "' is above the maximum of 400gbit");
  return static_cast<uint64_t>(r);
}

Result<uint64_t> parse_size_bytes(const std::string& s) {
  double v = 0;
  std::string unit;
  if (!split_number(s, v, unit)) return make_error(EINVAL, "'" + s + "' is not a size (like 10MB, 512KiB, 2GB)");
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kb" || unit == "k")
    scale = 1e3;
  else if (unit == "mb" || unit == "m")
    scale = 1e6;
  else if (unit == "gb" || unit == "g")
    scale = 1e9;
  else if (unit == "tb" || unit == "t")
    scale = 1e12;
  else if (unit == "kib")
    scale = 1024.0;
  else if (unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return make_error(EINVAL, "'" + s + "' has an unknown unit '" + unit + "' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  double bytes = v * scale;
  if (bytes > 1e18) return make_error(ERANGE, "'" + s + "' is too large");
  return static_cast<uint64_t>(std::llround(bytes));
}

Result<PortRange> parse_port_range(const std::string& s) {
  auto one = [&](const std::string& p) -> Result<uint16_t> {
    if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
      return make_error(EINVAL, "'" + s + "' is not a port or port range (80 or 8000-8100)");
    unsigned long v = std::stoul(p);
    if (v < 1 || v > 65535) return make_error(ERANGE, "'" + s + "': ports are 1-65535");
    return static_cast<uint16_t>(v);
  };
  PortRange r;
  auto dash = s.find('-');
  auto lo = one(s.substr(0, dash));
  if (!lo) return lo.error();
  r.lo = r.hi = *lo;
  if (dash != std::string::npos) {
    auto hi = one(s.substr(dash + 1));
    if (!hi) return hi.error();
    r.hi = *hi;
    if (r.hi < r.lo) return make_error(EINVAL, "'" + s + "': the range ends before it starts");
  }
  return r;
}

}  // namespace faultline
