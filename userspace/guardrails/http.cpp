// URL and status-line parsing, strict about what they accept.
#include "userspace/guardrails/http.h"

#include <cctype>

namespace faultline {

Result<HttpUrl> parse_http_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    return make_error(ENOTSUP, "'" + url + "': https is not supported by the health probe; probe a plain http endpoint");
  if (url.rfind(scheme, 0) != 0) return make_error(EINVAL, "'" + url + "' is not an http:// URL");
  std::string rest = url.substr(scheme.size());
  HttpUrl u;
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) u.path = rest.substr(slash);
  for (char c : u.path) {
    if (c <= ' ' || c == 0x7f) return make_error(EINVAL, "'" + url + "' has a space or control character in its path");
  }
  if (authority.empty()) return make_error(EINVAL, "'" + url + "' has no host");
  std::string port;
  if (authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos) return make_error(EINVAL, "'" + url + "' has an unclosed [IPv6] host");
    u.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return make_error(EINVAL, "'" + url + "' has junk after the [IPv6] host");
      port = after.substr(1);
    }
  } else {
    auto colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return make_error(EINVAL, "'" + url + "' has no host");
  if (authority.find('@') != std::string::npos) return make_error(EINVAL, "'" + url + "': credentials in the URL are not supported");
  if (!port.empty() || authority.back() == ':') {
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
      return make_error(EINVAL, "'" + url + "' has a bad port");
    unsigned long p = std::stoul(port);
    if (p < 1 || p > 65535) return make_error(ERANGE, "'" + url + "': ports are 1-65535");
    u.port = static_cast<uint16_t>(p);
  }
  return u;
}

Result<HttpStatus> parse_status_line(std::string_view b) {
  auto eol = b.find("\r\n");
  if (eol == std::string_view::npos) {
    eol = b.find('\n');
    if (eol == std::string_view::npos) return make_error(EPROTO, "no complete status line");
  }
  std::string_view line = b.substr(0, eol);
  // HTTP/D.D SP DDD [SP reason]
  if (line.size() < 12 || line.substr(0, 5) != "HTTP/") return make_error(EPROTO, "not an HTTP response");
  if (!std::isdigit(static_cast<unsigned char>(line[5])) || line[6] != '.' ||
      !std::isdigit(static_cast<unsigned char>(line[7])) || line[8] != ' ')
    return make_error(EPROTO, "bad HTTP version in the status line");
  for (int i = 9; i < 12; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(line[i]))) return make_error(EPROTO, "bad status code");
  }
  if (line.size() > 12 && line[12] != ' ') return make_error(EPROTO, "bad status code");
  HttpStatus s;
  s.major = line[5] - '0';
  s.minor = line[7] - '0';
  s.code = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  if (s.code < 100) return make_error(EPROTO, "status code below 100");
  return s;
}

}  // namespace faultline
