// One field of a typed experiment, as each family's table lists it (its
// experiment.h): the JSON name, the `faultctl run` flag that spells it, other
// names a reader accepts, how the JSON value is written, its unit, its range
// and what it is for. The CLI's --help, the readers' bounds and the test that
// every door refuses the same value are made from these rows, so a range is
// written once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

struct FlagField;

// How a field's JSON value is written.
enum class FieldKind : uint8_t {
  Text,      // a string (the flag's text)
  Whole,     // a whole number
  Number,    // any finite number
  Switch,    // true or false (a flag without a value)
  List,      // an array of strings (a repeatable flag)
  Duration,  // a duration as the flag takes it, a string ("250ms", "2m"); unit "ms", the range in ms
};

// The values a numeric field takes, in its JSON unit. An open end excludes
// its bound ("above 0, at most 100").
struct FieldRange {
  double lo = 0;
  double hi = 0;
  bool lo_open = false;
  bool hi_open = false;
};

struct ExperimentField {
  const char* field;  // "health_max_latency_ms"
  const char* flag;   // "health-max-latency"
  // Other names of the field, comma-separated ("" for none). A Duration
  // field's alias ending in "_sec" or "_ms" is its old spelling, a whole
  // number of that unit ("interval_sec": 5): read for one release, deprecated.
  const char* aliases;
  FieldKind kind;
  const char* unit;  // "ms", "s", "%", "bit/s", or "" for a text or a plain number
  std::optional<FieldRange> range;
  const char* help;
};

// The row of `field` in table, or null.
[[nodiscard]] const ExperimentField* find_field(std::span<const ExperimentField> table, const std::string& field);
// The row of `name`, a field or one of its aliases, or null.
[[nodiscard]] const ExperimentField* find_field_or_alias(std::span<const ExperimentField> table,
                                                         const std::string& name);
// The aliases of f.
[[nodiscard]] std::vector<std::string> field_aliases(const ExperimentField& f);
// The row whose flag is `flag`, or null.
[[nodiscard]] const ExperimentField* find_flag(std::span<const ExperimentField> table, const std::string& flag);

// A table's flag <-> field pairs, for spec_error_from_flags().
[[nodiscard]] std::vector<FlagField> flag_fields_of(std::span<const ExperimentField> table);

// The range in the JSON field's words: "1-60000", "above 0, at most 100".
[[nodiscard]] std::string field_range_text(const ExperimentField& f);
// The range in the flag's words: durations as the flag takes them ("1ms-60s"),
// other units after the numbers ("8000-400000000000 bit/s").
[[nodiscard]] std::string flag_range_text(const ExperimentField& f);

// The --help line of a field's flag: its help and its range.
[[nodiscard]] std::string flag_help(const ExperimentField& f);
// The same for the flag of table's row `flag` (it must be there).
[[nodiscard]] std::string flag_help(std::span<const ExperimentField> table, const std::string& flag);

// Whether v is within f's range (a field without one: any v).
[[nodiscard]] bool in_range(const ExperimentField& f, double v);

// A Duration field's value, written as its flag takes it ("250ms", "2m"),
// within the row's range. The errors name the flag (`flag`, else the row's),
// in the words `faultctl run` and every experiment reader use: "--interval
// '11m': must be within 100ms-10m", "--interval: '5' has no unit (...)".
[[nodiscard]] Result<uint64_t> parse_duration_field(const ExperimentField& f, const std::string& text,
                                                    const char* flag = nullptr);
// A duration in the words parse_duration_field() reads back exactly: the
// largest unit that divides it ("2m", "1500ms", "90s").
[[nodiscard]] std::string duration_field_text(uint64_t ns);

}  // namespace faultline
