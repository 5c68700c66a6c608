// The MCP side of a guard rule: a tool name glob and matchers on the call's
// arguments, each naming one argument by JSON pointer (RFC 6901).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace faultline {

struct McpArgRegex;  // a compiled std::regex, kept out of this header

// {"arg": "/path", "prefix": "/etc/"} and its kin. One test per matcher:
//   prefix  the argument is a string that, as a path normalised (".." and "."
//           resolved, duplicate slashes removed), starts with the prefix
//   equals  the argument is this string, or a number or boolean written so
//   regex   the argument is a string in which the ECMAScript regex is found
//   over    the argument is a number greater than this one
struct McpArgMatcher {
  enum class Test : uint8_t { Prefix, Equals, Regex, Over };
  std::string pointer;  // "/path", "/options/mode"; "" is the whole arguments object
  Test test = Test::Equals;
  std::string text;   // the prefix, the value, or the regex as written
  double number = 0;  // over
  std::shared_ptr<const McpArgRegex> regex;

  [[nodiscard]] bool matches(const nlohmann::json& arguments) const;
  [[nodiscard]] std::string describe() const;  // "/path prefix /etc/"
};

// The test's name as a rule writes it ("prefix", "equals", "regex", "over").
[[nodiscard]] std::string_view mcp_arg_test_name(McpArgMatcher::Test t);

// A pointer as RFC 6901 writes it: "" or "/a/b", "~0" and "~1" only as escapes.
[[nodiscard]] Status check_json_pointer(std::string_view pointer);
// A regex, compiled (an error names what is wrong with it).
[[nodiscard]] Result<std::shared_ptr<const McpArgRegex>> compile_mcp_regex(const std::string& pattern);

// A path as prefix matching sees it: duplicate slashes folded, "." removed,
// ".." resolved against the part before it (never above the root of an
// absolute path; kept at the front of a relative one). "/tmp/../etc//passwd"
// -> "/etc/passwd". A trailing slash is kept.
[[nodiscard]] std::string normalize_arg_path(std::string_view path);

// A tool name glob: '*' any run of characters, '?' one, everything else itself.
[[nodiscard]] bool mcp_glob_match(std::string_view glob, std::string_view name);
// A glob as a rule or flag may write it: 1-128 printable characters, no spaces.
[[nodiscard]] Status check_mcp_glob(std::string_view glob);

}  // namespace faultline
