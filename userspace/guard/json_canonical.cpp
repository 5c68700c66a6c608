// RFC 8785: sorting by UTF-16 code units, ECMAScript number text, minimal escapes.
#include "userspace/guard/json_canonical.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <system_error>
#include <vector>

#include "base/json_quote.h"

namespace faultline {
namespace json_canonical_detail {

// A name's UTF-16 code units: the order RFC 8785 sorts members by. UTF-8's
// byte order is the code points' order, which differs from UTF-16's for the
// characters above U+FFFF (surrogates, D800-DBFF) against U+E000-U+FFFF.
bool utf16_units(const std::string& s, std::u16string& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    size_t n = 0;
    if (c < 0x80) {
      cp = c;
      n = 1;
    } else if ((c & 0xe0) == 0xc0) {
      cp = c & 0x1f;
      n = 2;
    } else if ((c & 0xf0) == 0xe0) {
      cp = c & 0x0f;
      n = 3;
    } else if ((c & 0xf8) == 0xf0) {
      cp = c & 0x07;
      n = 4;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    i += n;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out.push_back(static_cast<char16_t>(0xd800 + (cp >> 10)));
      out.push_back(static_cast<char16_t>(0xdc00 + (cp & 0x3ff)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
  }
  return true;
}

// Minimal escapes, UTF-8 as it is (U+007F and above included): json_quote()'s.
void append_string(const std::string& s, std::string& out) { out += json_quote(s); }

bool append_value(const nlohmann::json& v, std::string& out) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      out += "null";
      return true;
    case nlohmann::json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return true;
    case nlohmann::json::value_t::number_integer:
      out += ecmascript_number(static_cast<double>(v.get<int64_t>()));
      return true;
    case nlohmann::json::value_t::number_unsigned:
      out += ecmascript_number(static_cast<double>(v.get<uint64_t>()));
      return true;
    case nlohmann::json::value_t::number_float: {
      const double d = v.get<double>();
      if (!std::isfinite(d)) return false;
      out += ecmascript_number(d);
      return true;
    }
    case nlohmann::json::value_t::string: {
      std::u16string ignored;
      if (!utf16_units(v.get_ref<const std::string&>(), ignored)) return false;
      append_string(v.get_ref<const std::string&>(), out);
      return true;
    }
    case nlohmann::json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ',';
        first = false;
        if (!append_value(item, out)) return false;
      }
      out += ']';
      return true;
    }
    case nlohmann::json::value_t::object: {
      struct Member {
        std::u16string key16;
        const std::string* key;
        const nlohmann::json* value;
      };
      std::vector<Member> members;
      members.reserve(v.size());
      for (auto it = v.begin(); it != v.end(); ++it) {
        Member m{{}, &it.key(), &it.value()};
        if (!utf16_units(it.key(), m.key16)) return false;
        members.push_back(std::move(m));
      }
      std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.key16 < b.key16; });
      out += '{';
      bool first = true;
      for (const Member& m : members) {
        if (!first) out += ',';
        first = false;
        append_string(*m.key, out);
        out += ':';
        if (!append_value(*m.value, out)) return false;
      }
      out += '}';
      return true;
    }
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded:
      return false;
  }
  return false;
}

}  // namespace json_canonical_detail

std::string ecmascript_number(double v) {
  if (v == 0) return "0";  // -0 too
  // The shortest digits that read back as v (what ECMAScript's algorithm
  // asks for), from to_chars' scientific form: "d.ddde[+-]XX".
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  if (ec != std::errc()) return "";
  const std::string_view sci(buf, static_cast<size_t>(end - buf));
  const size_t e = sci.find('e');
  std::string_view mantissa = sci.substr(0, e);
  const int exp10 = std::stoi(std::string(sci.substr(e + 1)));
  std::string out;
  if (mantissa.front() == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // v = 0.digits * 10^n
  if (k <= n && n <= 21) {
    out += digits + std::string(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += "e";
    out += n - 1 >= 0 ? "+" : "-";
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

std::string canonical_json(const nlohmann::json& value) {
  std::string out;
  if (!json_canonical_detail::append_value(value, out)) return "";
  return out;
}

}  // namespace faultline
