// Kubernetes request facts: the API server's request info (verb, resource,
// subresource, namespace, name) from a method, path and query.
#include "userspace/guard/k8s_facts.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace k8s_facts_detail {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding as Go's URL parser does it (plus_space: a query's '+' is a
// space). nullopt on a bad escape.
std::optional<std::string> unescape(std::string_view s, bool plus_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (plus_space && s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), s.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
}

// The first value of a query parameter, as Go's url.Values.Get after
// ParseQuery (pairs with a bad escape or a ';' are dropped).
std::optional<std::string> query_value(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty() || pair.find(';') != std::string_view::npos) continue;
    const size_t eq = pair.find('=');
    auto k = unescape(pair.substr(0, eq), true);
    auto v = unescape(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
    if (!k || !v) continue;
    if (*k == key) return v;
  }
  return std::nullopt;
}

// ListOptions' boolean: absent is false; "0" or "false" (any case) is false;
// any other value, the empty one too, is true.
bool query_bool(std::string_view query, std::string_view key) {
  auto v = query_value(query, key);
  if (!v) return false;
  std::string lower(*v);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower != "0" && lower != "false";
}

// A name the API server takes from `fieldSelector=metadata.name=N` (or ==)
// when it is the selector's requirement and a valid path segment.
std::string field_selector_name(std::string_view query) {
  auto sel = query_value(query, "fieldSelector");
  if (!sel) return "";
  std::string_view s = *sel;
  std::string found;
  while (true) {
    const size_t comma = s.find(',');
    std::string_view term = s.substr(0, comma);
    while (!term.empty() && term.front() == ' ') term.remove_prefix(1);
    while (!term.empty() && term.back() == ' ') term.remove_suffix(1);
    for (std::string_view op : {"==", "="}) {
      const std::string prefix = "metadata.name" + std::string(op);
      if (term.starts_with(prefix) && term.substr(prefix.size()).find('=') == std::string_view::npos) {
        found = std::string(term.substr(prefix.size()));
        while (!found.empty() && found.front() == ' ') found.erase(0, 1);
        break;
      }
    }
    if (!found.empty() || comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  if (found == "." || found == ".." || found.find_first_of("/%") != std::string::npos) return "";
  return found;
}

std::string method_verb(std::string_view method) {
  if (method == "POST") return "create";
  if (method == "GET" || method == "HEAD") return "get";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return "delete";
  return "";
}

}  // namespace k8s_facts_detail

std::optional<K8sRequestFacts> k8s_request_facts(std::string_view method, std::string_view target) {
  using namespace k8s_facts_detail;
  // Absolute form (a proxied plain-HTTP request): the path after the authority.
  for (std::string_view scheme : {"http://", "https://"}) {
    if (!istarts_with(target, scheme)) continue;
    const size_t slash = target.find('/', scheme.size());
    const size_t query = target.find('?', scheme.size());
    if (slash == std::string_view::npos || (query != std::string_view::npos && query < slash))
      return std::nullopt;  // "http://host" or "http://host?x": the root, no API path
    target.remove_prefix(slash);
    break;
  }
  if (const size_t hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
  const size_t qmark = target.find('?');
  std::string_view raw_path = target.substr(0, qmark);
  const std::string_view query = qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1);
  if (raw_path.empty() || raw_path.front() != '/') return std::nullopt;

  K8sRequestFacts unknown;
  unknown.unknown = true;
  auto path = unescape(raw_path, false);
  // A bad escape: the server refuses the request (400); a path that would be
  // an API path is unknown rather than let past a rule.
  if (!path) return istarts_with(raw_path, "/api") ? std::optional(unknown) : std::nullopt;
  const std::string_view p = *path;
  if (!(p == "/api" || p == "/apis" || p.starts_with("/api/") || p.starts_with("/apis/"))) {
    // "//api/v1/...", "/./api/..." may reach the API server's handler as an
    // API path all the same.
    const size_t first = p.find_first_not_of("/.");
    if (first != std::string_view::npos && first > 1 && p.substr(first).starts_with("api")) return unknown;
    return std::nullopt;
  }
  // An encoded '/' splits otherwise for the server than for the raw bytes.
  if (path->size() != raw_path.size() &&
      std::count(p.begin(), p.end(), '/') != std::count(raw_path.begin(), raw_path.end(), '/'))
    return unknown;

  std::string_view rest = p.substr(1);
  if (rest.ends_with('/')) rest.remove_suffix(1);
  std::vector<std::string_view> parts;
  while (true) {
    const size_t slash = rest.find('/');
    const std::string_view seg = rest.substr(0, slash);
    if (seg.empty() || seg == "." || seg == "..") return unknown;
    parts.push_back(seg);
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }

  K8sRequestFacts f;
  size_t at = 0;
  if (parts[0] == "api") {
    if (parts.size() < 3) return std::nullopt;  // /api, /api/v1: discovery
    at = 2;
  } else {
    if (parts.size() < 4) return std::nullopt;  // /apis, /apis/apps, /apis/apps/v1: discovery
    f.api_group = std::string(parts[1]);
    at = 3;
  }
  std::vector<std::string_view> cur(parts.begin() + static_cast<std::ptrdiff_t>(at), parts.end());
  if (cur[0] == "watch" || cur[0] == "proxy") {  // the legacy verb prefixes
    f.verb = std::string(cur[0]);
    cur.erase(cur.begin());
    if (cur.empty()) return unknown;
  } else {
    f.verb = method_verb(method);
  }
  if (cur[0] == "namespaces" && cur.size() > 1) {
    f.namespace_ = std::string(cur[1]);
    // /namespaces/NS/RESOURCE/...; but /namespaces/NS/status and /finalize are
    // the namespace's own subresources.
    if (cur.size() > 2 && cur[2] != "status" && cur[2] != "finalize") cur.erase(cur.begin(), cur.begin() + 2);
  }
  std::string subresource;
  if (cur.size() >= 3 && f.verb != "proxy") subresource = std::string(cur[2]);
  if (cur.size() >= 2) f.name = std::string(cur[1]);
  f.resource = std::string(cur[0]);

  if (f.name.empty() && f.verb == "get") {
    f.verb = query_bool(query, "watch") ? "watch" : "list";
    f.name = field_selector_name(query);
  }
  if (f.name.empty() && f.verb == "delete") f.verb = "deletecollection";
  // A connection into a pod (the websocket GET of kubectl exec too) is
  // authorized as create.
  if (f.resource == "pods" && (subresource == "exec" || subresource == "attach" || subresource == "portforward"))
    f.verb = "create";
  if (!f.api_group.empty()) f.resource += "." + f.api_group;
  if (!subresource.empty()) f.resource += "/" + subresource;
  return f;
}

}  // namespace faultline
