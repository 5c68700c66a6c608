// RFC 8785 JSON Canonicalization Scheme: one text per JSON value, so a hash
// of it names the value whatever its writer's order, spacing or escapes.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace faultline {

// The canonical text of a value (RFC 8785): objects' members sorted by their
// names' UTF-16 code units, no whitespace, strings with only the escapes
// JSON.stringify makes (\b \t \n \f \r \" \\ and \u00xx for the other
// controls), numbers as ECMAScript writes an IEEE double (1e+21, 0.000001,
// 1e-7; an integer beyond 2^53 as the double nearest it). A value holding a
// non-finite number or invalid UTF-8 (neither comes out of a parser) gives "".
[[nodiscard]] std::string canonical_json(const nlohmann::json& value);

// An ECMAScript Number's text (Number.prototype.toString) of a finite double.
[[nodiscard]] std::string ecmascript_number(double v);

}  // namespace faultline
