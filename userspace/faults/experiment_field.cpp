// The rows of an experiment's field tables, and the words made from them.
#include "userspace/faults/experiment_field.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/units.h"
#include "userspace/faults/spec_fields.h"

namespace faultline {
namespace {

// A bound as written in JSON: whole numbers without a fraction.
std::string number_text(double v) {
  std::ostringstream o;
  if (std::floor(v) == v && std::fabs(v) < 1e18)
    o << static_cast<int64_t>(v);
  else
    o << v;
  return o.str();
}

// A bound of a duration in the flag's words: the largest whole unit ("1h", "10m", "60s", "100ms").
std::string duration_text(double v, const std::string& unit) {
  const uint64_t ms = static_cast<uint64_t>(std::llround(unit == "s" ? v * 1000 : v));
  if (ms == 0) return "0";
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0 && ms >= 600'000) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

bool is_duration_unit(const std::string& unit) { return unit == "s" || unit == "ms"; }

std::string range_words(const FieldRange& r, const std::string& lo, const std::string& hi) {
  if (r.lo_open || r.hi_open)
    return std::string(r.lo_open ? "above " : "at least ") + lo + ", " + (r.hi_open ? "below " : "at most ") + hi;
  return lo + "-" + hi;
}

}  // namespace

const ExperimentField* find_field(std::span<const ExperimentField> table, const std::string& field) {
  for (const auto& f : table)
    if (field == f.field) return &f;
  return nullptr;
}

std::vector<std::string> field_aliases(const ExperimentField& f) {
  std::vector<std::string> out;
  std::string all = f.aliases;
  for (size_t at = 0; at < all.size();) {
    const size_t comma = std::min(all.find(',', at), all.size());
    if (comma > at) out.push_back(all.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

const ExperimentField* find_field_or_alias(std::span<const ExperimentField> table, const std::string& name) {
  for (const auto& f : table) {
    if (name == f.field) return &f;
    for (const auto& a : field_aliases(f))
      if (name == a) return &f;
  }
  return nullptr;
}

const ExperimentField* find_flag(std::span<const ExperimentField> table, const std::string& flag) {
  for (const auto& f : table)
    if (flag == f.flag) return &f;
  return nullptr;
}

std::vector<FlagField> flag_fields_of(std::span<const ExperimentField> table) {
  std::vector<FlagField> out;
  for (const auto& f : table) out.push_back({f.flag, f.field});
  return out;
}

std::string field_range_text(const ExperimentField& f) {
  if (!f.range) return "";
  // A duration is written as the flag takes it: its range too.
  if (f.kind == FieldKind::Duration) return flag_range_text(f);
  // A whole-number field's lowest value is the lower end rounded up (0.1 s: 1).
  const double lo = f.kind == FieldKind::Whole && !f.range->lo_open ? std::ceil(f.range->lo) : f.range->lo;
  return range_words(*f.range, number_text(lo), number_text(f.range->hi));
}

std::string flag_range_text(const ExperimentField& f) {
  if (!f.range) return "";
  const std::string unit = f.unit;
  if (is_duration_unit(unit))
    return range_words(*f.range, duration_text(f.range->lo, unit), duration_text(f.range->hi, unit));
  std::string words = range_words(*f.range, number_text(f.range->lo), number_text(f.range->hi));
  if (!unit.empty() && unit != "%") words += " " + unit;
  return words;
}

std::string flag_help(const ExperimentField& f) {
  std::string h = f.help;
  if (f.range) h += " (" + flag_range_text(f) + ")";
  return h;
}

std::string flag_help(std::span<const ExperimentField> table, const std::string& flag) {
  const ExperimentField* f = find_flag(table, flag);
  return f == nullptr ? std::string() : flag_help(*f);
}

bool in_range(const ExperimentField& f, double v) {
  if (!f.range) return true;
  const FieldRange& r = *f.range;
  const bool lo_ok = r.lo_open ? v > r.lo : v >= r.lo;
  const bool hi_ok = r.hi_open ? v < r.hi : v <= r.hi;
  return lo_ok && hi_ok;
}

Result<uint64_t> parse_duration_field(const ExperimentField& f, const std::string& text, const char* flag) {
  const std::string name = std::string("--") + (flag != nullptr ? flag : f.flag);
  auto ns = parse_duration_ns(text);
  if (!ns) return input_error(ns.error().err != 0 ? ns.error().err : EINVAL, name + ": " + ns.error().message);
  // The range is in ms: compare in ns, so 99.9ms is below 100ms.
  if (f.range && !in_range(f, static_cast<double>(*ns) / 1e6))
    return input_error(EINVAL, name + " '" + text + "': must be within " + flag_range_text(f));
  return *ns;
}

std::string duration_field_text(uint64_t ns) {
  struct Unit {
    uint64_t ns;
    const char* name;
  };
  constexpr Unit kUnits[] = {{3'600'000'000'000ULL, "h"}, {60'000'000'000ULL, "m"}, {1'000'000'000ULL, "s"},
                             {1'000'000ULL, "ms"},        {1'000ULL, "us"},         {1ULL, "ns"}};
  if (ns == 0) return "0s";
  for (const Unit& u : kUnits)
    if (ns % u.ns == 0) return std::to_string(ns / u.ns) + u.name;
  return std::to_string(ns) + "ns";
}

}  // namespace faultline
