// What an explicit forward proxy reads from a request line: an absolute-form
// URL (GET http://host:port/path) or a CONNECT authority (host:port), split by
// http-parser's URL splitter and checked as a proxy must (scheme, port, IPv6
// literals), and the head rewritten to origin-form for the upstream. Pure
// functions over text: the fuzz target (selftests/fuzz/proxy_request_fuzz.cpp)
// drives them as the relay does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace faultline {

struct ProxyTarget {
  std::string scheme;  // "http", or "https" for a CONNECT
  std::string host;    // a name or an address; an IPv6 literal without its brackets
  uint16_t port = 0;   // never 0 (an absent port is the scheme's default; CONNECT needs one)
  std::string origin;  // path and query, "/" when the URL has none; empty for a CONNECT

  // "host:port", "[v6]:port": what the upstream is told in Host and named by in errors.
  [[nodiscard]] std::string authority() const;
};

// The target of a forward proxy's request. Bad input (EINVAL) names what is
// wrong, for the 400 the client gets: an origin-form request ("a forward proxy
// needs an absolute-form URL"), an unknown scheme, a bad or zero port, a
// CONNECT without a port, an empty host.
[[nodiscard]] Result<ProxyTarget> parse_proxy_target(std::string_view method, std::string_view url);

// The head as the upstream gets it: the request line in origin-form, the
// Proxy-Connection and Proxy-Authorization fields gone, and "Connection:
// close" in place of the client's (a forward connection carries one
// upstream exchange; see docs/proxy.md, "Forward proxy"); "Connection:
// Upgrade" when the client asked for an upgrade (its Connection names the
// token and it has an Upgrade field: a websocket). `head` is as the
// session holds it: the bytes up to the blank line's last LF, which the relay
// forwards with the body; the result ends the same way.
[[nodiscard]] std::string origin_form_head(std::string_view head, std::string_view origin);

}  // namespace faultline
