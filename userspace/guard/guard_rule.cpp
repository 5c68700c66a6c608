// Guard rules: host matching (exact, *.suffix, :port) and the command line's
// patterns, which say by their shape what they match.
#include "userspace/guard/guard_rule.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace guard_rule_detail {

std::string lowercase(std::string_view s) {
  std::string o(s);
  std::transform(o.begin(), o.end(), o.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return o;
}

// A DNS name's labels: 1-63 letters, digits, '-' or '_' (not '-' at either end).
std::optional<std::string> name_problem(std::string_view name) {
  if (name.empty()) return "no name";
  if (name.size() > 253) return "longer than 253 characters";
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    const std::string_view label =
        name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty()) return "an empty label (two dots in a row, or a dot at either end)";
    if (label.size() > 63) return "a label longer than 63 characters";
    if (label.front() == '-' || label.back() == '-') return "a label starts or ends with '-'";
    for (char c : label)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
        return "'" + std::string(label) + "': letters, digits, '-' and '_' only";
    if (dot == std::string_view::npos) return std::nullopt;
    start = dot + 1;
  }
}

std::optional<uint16_t> port_number(std::string_view s) {
  if (s.empty() || s.size() > 5 || !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  const unsigned long v = std::stoul(std::string(s));
  if (v == 0 || v > 65535) return std::nullopt;
  return static_cast<uint16_t>(v);
}

// The request's host as rules compare it: lowercase, no trailing dot, an IPv6
// literal without its brackets.
std::string canonical_host(std::string_view host) {
  std::string h = lowercase(host);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  while (!h.empty() && h.back() == '.') h.pop_back();
  return h;
}

constexpr std::array<std::string_view, 9> kKnownMethods = {"GET",  "POST",    "PUT",     "PATCH", "DELETE",
                                                           "HEAD", "OPTIONS", "CONNECT", "TRACE"};

bool known_method(std::string_view word) {
  return std::find(kKnownMethods.begin(), kKnownMethods.end(), word) != kKnownMethods.end();
}

std::string flag_of(GuardVerdict v) { return "--" + std::string(guard_verdict_name(v)); }

}  // namespace guard_rule_detail

std::string_view guard_verdict_name(GuardVerdict v) {
  switch (v) {
    case GuardVerdict::Allow:
      return "allow";
    case GuardVerdict::Deny:
      return "deny";
    case GuardVerdict::Approve:
      return "approve";
  }
  return "deny";
}

std::optional<GuardVerdict> guard_verdict_from_name(std::string_view name) {
  if (name == "allow") return GuardVerdict::Allow;
  if (name == "deny") return GuardVerdict::Deny;
  if (name == "approve") return GuardVerdict::Approve;
  return std::nullopt;
}

std::string canonical_guard_host(std::string_view host) { return guard_rule_detail::canonical_host(host); }

bool HostMatcher::matches(std::string_view host, uint16_t request_port) const {
  if (port && *port != request_port) return false;
  return matches_canonical(guard_rule_detail::canonical_host(host), request_port);
}

bool HostMatcher::matches_canonical(std::string_view h, uint16_t request_port) const {
  if (port && *port != request_port) return false;
  if (!wildcard) return h == name;
  // Strict subdomains only: "x.example.com" ends with ".example.com"; neither
  // "example.com" nor "badexample.com" does.
  return h.size() > name.size() + 1 && h.ends_with(name) && h[h.size() - name.size() - 1] == '.';
}

std::string HostMatcher::text() const {
  std::string h = wildcard ? "*." + name : name;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // an IPv6 literal
  if (port) h += ":" + std::to_string(*port);
  return h;
}

Result<HostMatcher> parse_host_matcher(std::string_view text) {
  using namespace guard_rule_detail;
  auto bad = [&](const std::string& why) { return input_error(EINVAL, "'" + std::string(text) + "': " + why); };
  if (text.empty()) return bad("no host");
  if (text.find("://") != std::string_view::npos) return bad("write the host without a scheme (api.example.com)");
  HostMatcher m;
  std::string_view name = text;
  if (name.front() == '[') {  // [IPv6] or [IPv6]:PORT
    const size_t close = name.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address without its closing ']'");
    std::string_view rest = name.substr(close + 1);
    name = name.substr(1, close - 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("expected ':PORT' after ']'");
      auto p = port_number(rest.substr(1));
      if (!p) return bad("'" + std::string(rest.substr(1)) + "' is not a port (1-65535)");
      m.port = p;
    }
    if (name.empty() || name.find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos)
      return bad("not an IPv6 address between '[' and ']'");
    m.name = lowercase(name);
    return m;
  }
  if (const size_t colon = name.rfind(':'); colon != std::string_view::npos) {
    if (name.find(':') != colon) return bad("an IPv6 address is written in brackets ([::1]:443)");
    auto p = port_number(name.substr(colon + 1));
    if (!p) return bad("'" + std::string(name.substr(colon + 1)) + "' is not a port (1-65535)");
    m.port = p;
    name = name.substr(0, colon);
  }
  if (name.starts_with("*.")) {
    m.wildcard = true;
    name.remove_prefix(2);
  }
  if (name.find('*') != std::string_view::npos) return bad("a wildcard is only '*.' at the start (*.example.com)");
  std::string lower = lowercase(name);
  while (!lower.empty() && lower.back() == '.') lower.pop_back();  // "example.com." is example.com
  if (auto why = name_problem(lower)) return bad(*why);
  m.name = std::move(lower);
  return m;
}

bool GuardRule::has_matcher() const {
  return host.has_value() || !path.empty() || !method.empty() || needs_llm_facts() || !dlp_type.empty() || is_mcp() ||
         is_sql() || is_k8s();
}

bool needs_plaintext(const GuardRule& rule) {
  return !rule.path.empty() || !rule.method.empty() || rule.needs_llm_facts() || !rule.dlp_type.empty() ||
         rule.is_k8s();
}

Result<std::string> parse_method(std::string_view text) {
  if (text.empty() || text.size() > 16 ||
      !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isalpha(c); }))
    return input_error(EINVAL, "'" + std::string(text) + "': a method is a word of letters (GET, POST, DELETE)");
  std::string m(text);
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return m;
}

Result<std::string> parse_sql_verb(std::string_view text) {
  if (text.empty() || text.size() > 32 ||
      !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isalpha(c); }))
    return input_error(EINVAL, "'" + std::string(text) + "': a SQL verb is a word of letters (SELECT, DROP, DELETE)");
  std::string v(text);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return v;
}

Result<std::string> parse_sql_glob(std::string_view text) {
  if (text.empty()) return input_error(EINVAL, "empty: a table or function name, or a glob ('prod.*')");
  if (text.size() > 128) return input_error(EINVAL, "'" + std::string(text.substr(0, 40)) + "...': longer than 128");
  for (unsigned char c : text)
    if (c <= ' ' || c == 0x7f)
      return input_error(EINVAL,
                         "'" + std::string(text) + "': a table or function glob has no spaces or control characters");
  std::string g(text);
  std::transform(g.begin(), g.end(), g.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return g;
}

Result<std::string> parse_k8s_verb(std::string_view text) {
  static constexpr std::array<std::string_view, 10> kVerbs = {
      "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "proxy", "*"};
  const std::string v = guard_rule_detail::lowercase(text);
  if (std::find(kVerbs.begin(), kVerbs.end(), v) == kVerbs.end())
    return input_error(EINVAL, "'" + std::string(text) +
                                   "': a Kubernetes verb is get, list, watch, create, update, patch, delete, "
                                   "deletecollection, proxy or *");
  return v;
}

Result<std::string> parse_k8s_glob(std::string_view text, std::string_view what) {
  if (text.empty()) return input_error(EINVAL, "empty: a " + std::string(what) + ", or a glob ('*')");
  if (text.size() > 253)
    return input_error(EINVAL, "'" + std::string(text.substr(0, 40)) + "...': longer than 253 characters");
  for (unsigned char c : text)
    if (c <= ' ' || c == 0x7f)
      return input_error(
          EINVAL, "'" + std::string(text) + "': a " + std::string(what) + " glob has no spaces or control characters");
  return guard_rule_detail::lowercase(text);
}

Result<GuardRule> parse_k8s_pattern(GuardVerdict action, std::string_view flag, std::string_view pattern) {
  auto bad = [&](const std::string& why) {
    return input_error(EINVAL, std::string(flag) + " '" + std::string(pattern) + "': " + why);
  };
  std::vector<std::string_view> words;
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] == ' ' || pattern[i] == '\t') {
      ++i;
      continue;
    }
    const size_t end = pattern.find_first_of(" \t", i);
    words.push_back(pattern.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i));
    i = end == std::string_view::npos ? pattern.size() : end;
  }
  GuardRule rule;
  rule.name = std::string(flag) + " " + std::string(pattern);
  rule.action = action;
  std::vector<std::string_view> positional;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "-n" || words[i] == "--namespace") {
      if (i + 1 == words.size()) return bad(std::string(words[i]) + " needs a namespace");
      if (!rule.k8s_namespace.empty()) return bad("one namespace (-n) at most");
      auto ns = parse_k8s_glob(words[++i], "namespace");
      if (!ns) return bad(ns.error().message);
      rule.k8s_namespace = std::move(*ns);
    } else if (words[i].starts_with('-')) {
      return bad("'" + std::string(words[i]) + "': the only option is -n NAMESPACE");
    } else {
      positional.push_back(words[i]);
    }
  }
  if (positional.size() < 2 || positional.size() > 3)
    return bad("expected 'VERB RESOURCE [NAME] [-n NAMESPACE]' ('delete secrets -n prod', 'create pods/exec')");
  auto verb = parse_k8s_verb(positional[0]);
  if (!verb) return bad(verb.error().message);
  rule.k8s_verb = std::move(*verb);
  auto resource = parse_k8s_glob(positional[1], "resource");
  if (!resource) return bad(resource.error().message);
  rule.k8s_resource = std::move(*resource);
  if (positional.size() == 3) {
    auto name = parse_k8s_glob(positional[2], "name");
    if (!name) return bad(name.error().message);
    rule.k8s_name = std::move(*name);
  }
  return rule;
}

bool sql_name_matches(std::string_view glob, std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view n = lower;
  if (glob.find('.') == std::string_view::npos) {
    if (size_t dot = n.rfind('.'); dot != std::string_view::npos) n.remove_prefix(dot + 1);
  }
  return mcp_glob_match(glob, n);
}

Result<CliPattern> parse_cli_pattern(GuardVerdict action, std::string_view pattern) {
  using namespace guard_rule_detail;
  const std::string flag = flag_of(action);
  const std::string named = flag + " '" + std::string(pattern) + "'";
  auto bad = [&](const std::string& why) { return input_error(EINVAL, named + ": " + why); };

  std::string_view rest = pattern;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  if (rest.empty()) return bad("an empty pattern (a host, a /path, a METHOD, or a CIDR)");
  if (rest.find("://") != std::string_view::npos)
    return bad("a URL: write the host (api.example.com) or a /path, without the scheme");

  GuardRule rule;
  rule.action = action;
  rule.name = flag + " " + std::string(rest);

  // An optional method first: "POST /v1/prod/". A word alone that is a known
  // method ("DELETE") is a method rule; any other word alone is a host.
  if (const size_t space = rest.find(' '); space != std::string_view::npos) {
    auto method = parse_method(rest.substr(0, space));
    if (!method) return bad("expected 'METHOD PATTERN' ('POST /v1/prod/'); " + method.error().message);
    rule.method = *method;
    rest.remove_prefix(space);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.find(' ') != std::string_view::npos) return bad("one method and one pattern, no more words");
  } else if (known_method(rest)) {
    rule.method = std::string(rest);
    return CliPattern(std::move(rule));
  }

  // A CIDR (or an address): the kernel rule of the existing guard. Allow and
  // deny only: the kernel cannot hold a connect for approval.
  if (rest.find_first_not_of("0123456789abcdefABCDEF:.[]/-tcpud") == std::string_view::npos) {
    auto kernel = parse_rule(action == GuardVerdict::Allow ? Verdict::Allow : Verdict::Deny, std::string(rest));
    if (kernel) {
      if (!rule.method.empty())
        return bad("a CIDR is judged by address in the kernel, which sees no method: drop '" + rule.method + "'");
      if (action == GuardVerdict::Approve)
        return bad(
            "a CIDR is judged by address in the kernel, which cannot hold a connect for approval: "
            "use --allow or --deny, or approve a host name");
      return CliPattern(CidrPattern{std::move(*kernel)});
    }
  }

  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    // "/secrets/": a path substring; "api.example.com/v1/": a host and a path.
    rule.path = std::string(rest.substr(slash));
    if (slash > 0) {
      auto host = parse_host_matcher(rest.substr(0, slash));
      if (!host) return bad("before the path, " + host.error().message);
      rule.host = std::move(*host);
    }
    return CliPattern(std::move(rule));
  }
  auto host = parse_host_matcher(rest);
  if (!host) return bad(host.error().message);
  rule.host = std::move(*host);
  return CliPattern(std::move(rule));
}

}  // namespace faultline
