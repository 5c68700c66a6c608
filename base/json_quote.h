// A JSON string literal without a JSON library.
#pragma once

#include <string>
#include <string_view>

namespace faultline {

// A JSON string literal, quotes included, with the minimal escapes RFC 8785 writes
// (\" \\ \b \f \n \r \t, \u00XX for the other controls; UTF-8 as it is,
// an invalid sequence as U+FFFD, as nlohmann's dump() with its replace
// handler): for replies built without a JSON library, and canonical JSON.
[[nodiscard]] std::string json_quote(std::string_view s);
// The same, appended to out.
void append_json_quoted(std::string& out, std::string_view s);

}  // namespace faultline
