// The forward proxy's request target and head rewrite. The URL split is
// http-parser's (the same parser that reads the head); what is ours is the
// checks on top and the line-by-line rewrite, both fuzzed.
#include "userspace/proxy/proxy_request.h"

#include <http_parser.h>

#include <cctype>
#include <cerrno>
#include <optional>

namespace faultline {
namespace {

bool proxy_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string_view url_field(std::string_view url, const http_parser_url& u, int field) {
  if ((u.field_set & (1u << field)) == 0) return {};
  return url.substr(u.field_data[field].off, u.field_data[field].len);
}

// The URL as the client wrote it, shortened for an error message.
std::string quoted_url(std::string_view url) {
  std::string out(url.substr(0, 200));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return "\"" + out + (url.size() > 200 ? "...\"" : "\"");
}

// The authority of an absolute-form URL ("host:port" between "//" and the path).
std::string_view url_authority(std::string_view url) {
  const size_t slashes = url.find("//");
  if (slashes == std::string_view::npos) return {};
  std::string_view rest = url.substr(slashes + 2);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);  // userinfo
  return rest;
}

// The port as written after the authority's last ':' (outside an IPv6
// literal's brackets); nullopt when there is no ':'.
std::optional<std::string_view> port_written(std::string_view authority) {
  const size_t close = authority.rfind(']');
  const size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos || (close != std::string_view::npos && colon < close)) return std::nullopt;
  if (close == std::string_view::npos && authority.find(':') != colon) return std::nullopt;  // a bare v6: not ours
  return authority.substr(colon + 1);
}

// A port written is 1-65535 in decimal digits.
bool port_ok(std::string_view port) {
  if (port.empty() || port.size() > 5) return false;
  unsigned value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + unsigned(c - '0');
  }
  return value >= 1 && value <= 65535;
}

}  // namespace

std::string ProxyTarget::authority() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ProxyTarget> parse_proxy_target(std::string_view method, std::string_view url) {
  const bool connect = method == "CONNECT";
  if (url.empty()) return input_error(EINVAL, "empty request target");
  ProxyTarget t;
  http_parser_url u{};
  http_parser_url_init(&u);
  if (connect) {
    // CONNECT host:port (RFC 9110 9.3.6): no scheme, no path, and a port.
    std::string_view authority = url;
    if (authority.find('/') != std::string_view::npos || authority.find('@') != std::string_view::npos)
      return input_error(EINVAL, "CONNECT needs host:port, not " + quoted_url(url));
    const auto port = port_written(authority);
    if (!port) return input_error(EINVAL, "CONNECT needs a port (host:port): " + quoted_url(url));
    if (!port_ok(*port))
      return input_error(EINVAL, "bad port \"" + std::string(port->substr(0, 16)) + "\" in CONNECT " + quoted_url(url));
    if (http_parser_parse_url(url.data(), url.size(), 1, &u) != 0)
      return input_error(EINVAL, "CONNECT target is not host:port (bad host or port): " + quoted_url(url));
    t.scheme = "https";
  } else {
    if (url.front() == '/' || url == "*")
      return input_error(EINVAL,
                         "a forward proxy needs an absolute-form URL (http://host/path), not " + quoted_url(url));
    if (const auto port = port_written(url_authority(url)); port && !port_ok(*port))
      return input_error(EINVAL, "bad port \"" + std::string(port->substr(0, 16)) + "\" in " + quoted_url(url));
    if (http_parser_parse_url(url.data(), url.size(), 0, &u) != 0)
      return input_error(EINVAL, "malformed URL (bad host or port?): " + quoted_url(url));
    const std::string_view scheme = url_field(url, u, UF_SCHEMA);
    if (proxy_iequals(scheme, "https"))
      return input_error(EINVAL, "https URLs go through CONNECT (set HTTPS_PROXY), not " + quoted_url(url));
    if (!proxy_iequals(scheme, "http"))
      return input_error(EINVAL, "unsupported scheme in " + quoted_url(url) + " (only http)");
    if ((u.field_set & (1u << UF_USERINFO)) != 0)
      return input_error(EINVAL, "user information in a proxied URL is refused: " + quoted_url(url));
    t.scheme = "http";
  }
  t.host = std::string(url_field(url, u, UF_HOST));
  if (t.host.empty()) return input_error(EINVAL, "no host in " + quoted_url(url));
  if ((u.field_set & (1u << UF_PORT)) != 0) {
    if (u.port == 0) return input_error(EINVAL, "bad port 0 in " + quoted_url(url));
    t.port = u.port;
  } else if (connect) {
    return input_error(EINVAL, "CONNECT needs a port: " + quoted_url(url));
  } else {
    t.port = 80;
  }
  if (!connect) {
    const std::string_view path = url_field(url, u, UF_PATH);
    t.origin = path.empty() ? "/" : std::string(path);
    if (const std::string_view query = url_field(url, u, UF_QUERY); (u.field_set & (1u << UF_QUERY)) != 0)
      t.origin += "?" + std::string(query);
  }
  return t;
}

std::string origin_form_head(std::string_view head, std::string_view origin) {
  std::string out;
  out.reserve(head.size() + 32);
  size_t pos = 0;
  bool first = true;
  bool folded_drop = false;  // a continuation line of a field that was dropped
  bool connection_upgrade = false, has_upgrade = false;
  while (pos < head.size()) {
    size_t nl = head.find('\n', pos);
    std::string_view line = head.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? head.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      first = false;
      // METHOD SP target SP version: only the target changes.
      const size_t sp1 = line.find(' ');
      const size_t sp2 = line.rfind(' ');
      if (sp1 == std::string_view::npos || sp2 == sp1) {
        out.append(line);
      } else {
        out.append(line.substr(0, sp1 + 1)).append(origin).append(line.substr(sp2));
      }
      out.append("\r\n");
      continue;
    }
    if (line.empty()) break;  // the blank line (only when the caller passed all of it)
    if (line.front() == ' ' || line.front() == '\t') {
      if (!folded_drop) out.append(line).append("\r\n");
      continue;
    }
    const size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if (colon != std::string_view::npos && proxy_iequals(name, "connection")) {
      // Its tokens, comma-separated: "keep-alive, Upgrade".
      std::string_view tokens = line.substr(colon + 1);
      while (!tokens.empty()) {
        const size_t comma = tokens.find(',');
        std::string_view t = tokens.substr(0, comma);
        while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
        while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
        connection_upgrade |= proxy_iequals(t, "upgrade");
        if (comma == std::string_view::npos) break;
        tokens.remove_prefix(comma + 1);
      }
    }
    has_upgrade |= colon != std::string_view::npos && proxy_iequals(name, "upgrade");
    folded_drop = proxy_iequals(name, "proxy-connection") || proxy_iequals(name, "proxy-authorization") ||
                  proxy_iequals(name, "connection") || proxy_iequals(name, "keep-alive");
    if (!folded_drop) out.append(line).append("\r\n");
  }
  // An upgrade (a websocket) keeps asking for it: the session relays both
  // ways once the upstream answers 101.
  out.append(connection_upgrade && has_upgrade ? "Connection: Upgrade\r\n\r" : "Connection: close\r\n\r");
  return out;
}

}  // namespace faultline
