// MCP rule matchers: tool globs, JSON pointers into a call's arguments, and
// the path normalisation prefix rules depend on.
#include "userspace/guard/mcp_rule.h"

#include <cerrno>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

namespace faultline {

struct McpArgRegex {
  std::regex re;
};

namespace mcp_rule_detail {

// The longest argument a regex runs over: libstdc++'s matcher recurses per
// character, so a multi-megabyte argument could exhaust the stack. A longer
// value matches when its first part does (the rule then errs towards acting).
constexpr size_t kRegexInputMax = 64 * 1024;

const nlohmann::json* at_pointer(const nlohmann::json& root, const std::string& pointer) {
  if (pointer.empty()) return &root;
  try {
    const nlohmann::json::json_pointer p(pointer);
    if (!root.contains(p)) return nullptr;
    return &root.at(p);
  } catch (const nlohmann::json::exception&) {
    return nullptr;  // an array index that is not a number, say
  }
}

std::string scalar_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  return {};
}

}  // namespace mcp_rule_detail

std::string_view mcp_arg_test_name(McpArgMatcher::Test t) {
  switch (t) {
    case McpArgMatcher::Test::Prefix:
      return "prefix";
    case McpArgMatcher::Test::Equals:
      return "equals";
    case McpArgMatcher::Test::Regex:
      return "regex";
    case McpArgMatcher::Test::Over:
      return "over";
  }
  return "equals";
}

bool McpArgMatcher::matches(const nlohmann::json& arguments) const {
  using namespace mcp_rule_detail;
  const nlohmann::json* v = at_pointer(arguments, pointer);
  if (v == nullptr) return false;
  switch (test) {
    case Test::Prefix:
      return v->is_string() && normalize_arg_path(v->get_ref<const std::string&>()).starts_with(text);
    case Test::Equals:
      return (v->is_string() || v->is_number() || v->is_boolean()) && scalar_text(*v) == text;
    case Test::Regex: {
      if (!v->is_string() || !regex) return false;
      const std::string& s = v->get_ref<const std::string&>();
      const std::string_view head = std::string_view(s).substr(0, kRegexInputMax);
      return std::regex_search(head.begin(), head.end(), regex->re);
    }
    case Test::Over:
      return v->is_number() && v->get<double>() > number;
  }
  return false;
}

std::string McpArgMatcher::describe() const {
  return (pointer.empty() ? std::string("(arguments)") : pointer) + " " + std::string(mcp_arg_test_name(test)) + " " +
         text;
}

Status check_json_pointer(std::string_view pointer) {
  if (pointer.empty()) return {};
  if (pointer.front() != '/')
    return input_error(EINVAL, "'" + std::string(pointer) + "': a JSON pointer starts with '/' (/path, /options/mode)");
  for (size_t i = 0; i < pointer.size(); ++i) {
    if (pointer[i] != '~') continue;
    if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1'))
      return input_error(EINVAL, "'" + std::string(pointer) + "': '~' is written ~0, and '/' inside a name ~1");
  }
  return {};
}

Result<std::shared_ptr<const McpArgRegex>> compile_mcp_regex(const std::string& pattern) {
  if (pattern.empty()) return input_error(EINVAL, "an empty regex");
  if (pattern.size() > 1024) return input_error(EINVAL, "a regex longer than 1024 characters");
  try {
    auto r = std::make_shared<McpArgRegex>();
    r->re = std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
    return std::shared_ptr<const McpArgRegex>(std::move(r));
  } catch (const std::regex_error& e) {
    return input_error(EINVAL, "'" + pattern + "': not a regex (" + e.what() + ")");
  }
}

std::string normalize_arg_path(std::string_view path) {
  const bool absolute = path.starts_with('/');
  const bool trailing = path.size() > 1 && path.ends_with('/');
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view part = path.substr(start, slash - start);
    start = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);  // "../x" stays relative to what the server calls its folder
      }
      continue;  // "/.." is "/"
    }
    parts.push_back(part);
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out += parts[i];
  }
  if (trailing && !parts.empty()) out += '/';
  if (out.empty()) out = ".";
  return out;
}

bool mcp_glob_match(std::string_view glob, std::string_view name) {
  // Iterative with one backtrack point: linear in practice, no recursion.
  size_t g = 0, n = 0, star = std::string_view::npos, mark = 0;
  while (n < name.size()) {
    if (g < glob.size() && (glob[g] == '?' || glob[g] == name[n])) {
      ++g;
      ++n;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      mark = n;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

Status check_mcp_glob(std::string_view glob) {
  if (glob.empty()) return input_error(EINVAL, "an empty tool name");
  if (glob.size() > 128) return input_error(EINVAL, "'" + std::string(glob.substr(0, 40)) + "...': longer than 128");
  for (unsigned char c : glob)
    if (c <= ' ' || c == 0x7f)
      return input_error(EINVAL, "'" + std::string(glob) + "': a tool name has no spaces or control characters");
  return {};
}

}  // namespace faultline
