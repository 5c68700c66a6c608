// Reading an experiment spec (faultcp's JSON model of a `faultctl run`) with
// errors that name the field: "spec.errno: not a known errno name". The fault
// families' experiment readers (experiment.h in each) build on these, and turn
// the errors of their own validate() -- which name the `faultctl run` flag
// ("--cores must be at least 1") -- into the same form, so the CLI, faultcp and
// faultd refuse the same values with one set of checks.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

// A flag of `faultctl run` and the spec field that carries it ("start-after",
// "start_after_ms").
struct FlagField {
  const char* flag;
  const char* field;
};

// An error naming spec.field: "spec.<field>: why" (bad input).
[[nodiscard]] Error spec_field_error(const std::string& field, const std::string& why);

// An error of a validate() that names flags, rewritten for a spec: every
// "--flag" of the table becomes "spec.<field>", and the message is prefixed
// with the first field named ("spec.cores: must be at least 1"). `fallback` is
// the field when the message names none of the table's flags.
[[nodiscard]] Error spec_error_from_flags(const Error& e, std::span<const FlagField> table,
                                          const std::string& fallback);

// The field an error of the form "spec.<field>: why" or "spec.<field> (--flag):
// why" names ("spec.cores"), or "".
[[nodiscard]] std::string spec_error_field(const Error& e);

// A whole number written as text, within [min, max], in the words `faultctl
// run` refuses a count flag with (the caller puts the flag or field before
// them): "'-3': expected a whole number from 1 to 1000000000", "12345678901:
// too large, expected ...". Signs, units, fractions are refused.
[[nodiscard]] Result<uint64_t> parse_whole_number(const std::string& s, uint64_t min, uint64_t max);
// A seed: any whole number a u64 holds, 0 to 18446744073709551615, in decimal.
[[nodiscard]] Result<uint64_t> parse_seed(const std::string& s);

// A count field, refused in the words of the CLI's count flags ("spec.after:
// 0: expected a whole number from 1 to 1000000000").
[[nodiscard]] Result<uint64_t> spec_count(const nlohmann::json& spec, const char* field, uint64_t min, uint64_t max);
// A percent field: a number within 0-100, refused in the words of the CLI's
// percent flags for the number as written ("spec.percent: '300' is outside 0-100").
[[nodiscard]] Result<double> spec_percent(const nlohmann::json& spec, const char* field);

// Typed reads of one field of a spec object (present: the caller checks).
[[nodiscard]] Result<std::string> spec_string(const nlohmann::json& spec, const char* field);
[[nodiscard]] Result<uint64_t> spec_uint(const nlohmann::json& spec, const char* field, uint64_t lo, uint64_t hi);
[[nodiscard]] Result<double> spec_number(const nlohmann::json& spec, const char* field);
[[nodiscard]] Result<bool> spec_bool(const nlohmann::json& spec, const char* field);
// A non-empty array of strings, each a `shape` ("NAME=VALUE"); `example` is a
// whole value the errors show ("[\"X-Tenant=blue\"]").
[[nodiscard]] Result<std::vector<std::string>> spec_strings(const nlohmann::json& spec, const char* field,
                                                            const std::string& shape, const std::string& example);

// The required duration_sec (whole seconds), in ns. Its caps are the family's
// validate()'s, so they are refused in the words `faultctl run` uses.
[[nodiscard]] Result<uint64_t> spec_duration_ns(const nlohmann::json& spec);
// An optional non-empty string field ("cgroup", "path") into out; absent: out untouched.
[[nodiscard]] Status spec_optional_path(const nlohmann::json& spec, const char* field, std::string& out);

// Refuses a member not in `known` ("spec.x: not a field of a <what> experiment").
[[nodiscard]] Status spec_known_fields(const nlohmann::json& spec, std::span<const char* const> known,
                                       const std::string& what);

}  // namespace faultline
