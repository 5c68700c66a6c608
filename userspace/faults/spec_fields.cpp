// Field-named errors and typed reads of an experiment spec.
#include "userspace/faults/spec_fields.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>

#include "base/units.h"

namespace faultline {

Error spec_field_error(const std::string& field, const std::string& why) {
  return input_error(EINVAL, "spec." + field + ": " + why);
}

Error spec_error_from_flags(const Error& e, std::span<const FlagField> table, const std::string& fallback) {
  std::string m = e.message;
  std::string first;
  size_t first_at = std::string::npos;
  // Longest flags first, so "--max-injections" is not read as "--max".
  std::vector<FlagField> by_length(table.begin(), table.end());
  std::sort(by_length.begin(), by_length.end(), [](const FlagField& a, const FlagField& b) {
    return std::string(a.flag).size() > std::string(b.flag).size();
  });
  std::string out;
  for (size_t i = 0; i < m.size();) {
    bool replaced = false;
    if (m.compare(i, 2, "--") == 0) {
      for (const auto& f : by_length) {
        const std::string flag = std::string("--") + f.flag;
        const size_t end = i + flag.size();
        if (m.compare(i, flag.size(), flag) != 0) continue;
        if (end < m.size() && (std::isalnum(static_cast<unsigned char>(m[end])) || m[end] == '-')) continue;
        if (first_at == std::string::npos) {
          first = f.field;
          first_at = out.size();
        }
        out += std::string("spec.") + f.field;
        i = end;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += m[i++];
  }
  const std::string field = first.empty() ? fallback : first;
  const std::string prefix = "spec." + field;
  // "spec.cores must be at least 1" reads "spec.cores: must be at least 1".
  if (first_at == 0 && out.compare(0, prefix.size(), prefix) == 0 && out.size() > prefix.size() &&
      (out[prefix.size()] == ' ' || out[prefix.size()] == ':')) {
    std::string rest = out.substr(prefix.size());
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == ':')) rest.erase(rest.begin());
    out = rest;
  }
  Error r = input_error(e.err != 0 ? e.err : EINVAL, prefix + ": " + out);
  return r;
}

std::string spec_error_field(const Error& e) {
  if (e.message.rfind("spec.", 0) != 0) return "";
  const auto colon = e.message.find(": ");
  const auto space = e.message.find(' ');
  if (colon == std::string::npos) return "";
  // "spec.percent (--percent): why" names its flag too.
  if (space != std::string::npos && space < colon &&
      !(e.message.compare(space, 4, " (--") == 0 && e.message[colon - 1] == ')' &&
        e.message.find(' ', space + 1) >= colon))
    return "";
  return e.message.substr(0, std::min(colon, space));
}

Result<uint64_t> parse_whole_number(const std::string& s, uint64_t min, uint64_t max) {
  const std::string range = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return input_error(EINVAL, "'" + s + "': expected " + range);
  if (s.size() > 19 || std::stoull(s) > max) return input_error(EINVAL, s + ": too large, expected " + range);
  const uint64_t v = std::stoull(s);
  if (v < min) return input_error(EINVAL, s + ": expected " + range);
  return v;
}

Result<uint64_t> parse_seed(const std::string& s) {
  const std::string range = "a whole number from 0 to 18446744073709551615";
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return input_error(EINVAL, "'" + s + "': expected " + range);
  const std::string digits = s.substr(std::min(s.find_first_not_of('0'), s.size() - 1));
  if (digits.size() > 20 || (digits.size() == 20 && digits > "18446744073709551615"))
    return input_error(EINVAL, s + ": too large, expected " + range);
  return static_cast<uint64_t>(std::stoull(digits));
}

Result<uint64_t> spec_count(const nlohmann::json& spec, const char* field, uint64_t min, uint64_t max) {
  const nlohmann::json& v = spec[field];
  if (!v.is_number_integer()) return spec_field_error(field, "must be a whole number");
  auto n = parse_whole_number(v.dump(), min, max);
  if (!n) return spec_field_error(field, n.error().message);
  return *n;
}

Result<double> spec_percent(const nlohmann::json& spec, const char* field) {
  auto p = spec_number(spec, field);
  if (!p) return p.error();
  if (*p < 0 || *p > 100) {
    auto words = parse_percent(spec[field].dump());
    return spec_field_error(field, words ? "must be within 0-100" : words.error().message);
  }
  return *p;
}

Result<std::string> spec_string(const nlohmann::json& spec, const char* field) {
  if (!spec[field].is_string()) return spec_field_error(field, "must be a string");
  return spec[field].get<std::string>();
}

Result<uint64_t> spec_uint(const nlohmann::json& spec, const char* field, uint64_t lo, uint64_t hi) {
  const auto& v = spec[field];
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)) {
    if (v.is_number_integer())
      return spec_field_error(field, "must be within " + std::to_string(lo) + "-" + std::to_string(hi) + " (got " +
                                         std::to_string(v.get<int64_t>()) + ")");
    return spec_field_error(field, "must be a whole number");
  }
  const uint64_t n = v.get<uint64_t>();
  if (n < lo || n > hi)
    return spec_field_error(
        field, "must be within " + std::to_string(lo) + "-" + std::to_string(hi) + " (got " + std::to_string(n) + ")");
  return n;
}

Result<double> spec_number(const nlohmann::json& spec, const char* field) {
  const auto& v = spec[field];
  if (!v.is_number() || !std::isfinite(v.get<double>())) return spec_field_error(field, "must be a finite number");
  return v.get<double>();
}

Result<bool> spec_bool(const nlohmann::json& spec, const char* field) {
  if (!spec[field].is_boolean()) return spec_field_error(field, "must be true or false");
  return spec[field].get<bool>();
}

Result<std::vector<std::string>> spec_strings(const nlohmann::json& spec, const char* field, const std::string& shape,
                                              const std::string& example) {
  const nlohmann::json& x = spec[field];
  if (!x.is_array() || x.empty()) return spec_field_error(field, "an array of " + shape + " texts, e.g. " + example);
  std::vector<std::string> out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!x[i].is_string())
      return spec_field_error(std::string(field) + "[" + std::to_string(i) + "]", "must be a string (" + shape + ")");
    out.push_back(x[i].get<std::string>());
  }
  return out;
}

Status spec_known_fields(const nlohmann::json& spec, std::span<const char* const> known, const std::string& what) {
  if (!spec.is_object()) return input_error(EINVAL, "spec: not a JSON object");
  for (const auto& item : spec.items()) {
    const std::string& key = item.key();
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) == known.end())
      return spec_field_error(key, "not a field of a " + what + " experiment");
  }
  return {};
}

Result<uint64_t> spec_duration_ns(const nlohmann::json& spec) {
  if (!spec.contains("duration_sec")) return spec_field_error("duration_sec", "is required");
  constexpr uint64_t kSecond = 1'000'000'000ULL;
  auto d = spec_uint(spec, "duration_sec", 0, UINT64_MAX / kSecond);
  if (!d) return d.error();
  return *d * kSecond;
}

Status spec_optional_path(const nlohmann::json& spec, const char* field, std::string& out) {
  if (!spec.contains(field)) return {};
  auto v = spec_string(spec, field);
  if (!v) return v.error();
  if (v->empty()) return spec_field_error(field, "is empty");
  out = *v;
  return {};
}

}  // namespace faultline
