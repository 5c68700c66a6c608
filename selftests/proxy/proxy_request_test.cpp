// The forward proxy's request target and head rewrite (proxy_request.h), as a
// table: absolute-form URLs and CONNECT authorities, IPv6 literals, default
// ports, and each bad input's message.
#include "userspace/proxy/proxy_request.h"

#include <gtest/gtest.h>

namespace {

using faultline::origin_form_head;
using faultline::parse_proxy_target;

struct TargetCase {
  const char* method;
  const char* url;
  const char* host;  // nullptr: refused, and the message contains `error`
  uint16_t port;
  const char* origin;
  const char* error;
};

TEST(ProxyRequest, TargetsAreSplitOrRefusedWithTheReason) {
  const TargetCase cases[] = {
      {"GET", "http://example.com/a/b?x=1&y=2", "example.com", 80, "/a/b?x=1&y=2", ""},
      {"GET", "http://example.com", "example.com", 80, "/", ""},
      {"GET", "http://example.com?q", "example.com", 80, "/?q", ""},
      {"POST", "HTTP://127.0.0.1:8080/v1/messages", "127.0.0.1", 8080, "/v1/messages", ""},
      {"GET", "http://[::1]:8443/x", "::1", 8443, "/x", ""},
      {"GET", "http://[2001:db8::1]/", "2001:db8::1", 80, "/", ""},
      {"CONNECT", "api.anthropic.com:443", "api.anthropic.com", 443, "", ""},
      {"CONNECT", "[::1]:443", "::1", 443, "", ""},
      {"GET", "/x", nullptr, 0, "", "absolute-form URL"},
      {"GET", "*", nullptr, 0, "", "absolute-form URL"},
      {"GET", "http://127.0.0.1:99999/x", nullptr, 0, "", "bad port \"99999\""},
      {"GET", "http://127.0.0.1:0/x", nullptr, 0, "", "bad port \"0\""},
      {"GET", "http://127.0.0.1:/x", nullptr, 0, "", "bad port \"\""},
      {"GET", "http://[::1]:http/x", nullptr, 0, "", "bad port \"http\""},
      {"GET", "https://example.com/", nullptr, 0, "", "CONNECT"},
      {"GET", "ftp://example.com/", nullptr, 0, "", "unsupported scheme"},
      {"GET", "http://user:pw@example.com/", nullptr, 0, "", "user information"},
      {"CONNECT", "example.com", nullptr, 0, "", "CONNECT needs a port"},
      {"CONNECT", "[::1]", nullptr, 0, "", "CONNECT needs a port"},
      {"CONNECT", "example.com:70000", nullptr, 0, "", "bad port \"70000\""},
      {"CONNECT", "example.com:443/x", nullptr, 0, "", "CONNECT needs host:port"},
      {"CONNECT", "", nullptr, 0, "", "empty request target"},
  };
  for (const auto& c : cases) {
    auto t = parse_proxy_target(c.method, c.url);
    if (c.host == nullptr) {
      ASSERT_FALSE(t.ok()) << c.method << " " << c.url << " was taken";
      EXPECT_NE(t.error().message.find(c.error), std::string::npos)
          << c.method << " " << c.url << ": " << t.error().message;
      EXPECT_TRUE(t.error().bad_input);
      continue;
    }
    ASSERT_TRUE(t.ok()) << c.method << " " << c.url << ": " << t.error().message;
    EXPECT_EQ(t->host, c.host) << c.url;
    EXPECT_EQ(t->port, c.port) << c.url;
    EXPECT_EQ(t->origin, c.origin) << c.url;
  }
  EXPECT_EQ(parse_proxy_target("CONNECT", "[::1]:443")->authority(), "[::1]:443");
  EXPECT_EQ(parse_proxy_target("GET", "http://h/")->authority(), "h:80");
}

TEST(ProxyRequest, HeadIsRewrittenToOriginFormWithoutProxyFields) {
  // As the session holds it: up to the blank line's CR (its LF goes with the body).
  const std::string head =
      "GET http://h:8080/p?q HTTP/1.1\r\nHost: h:8080\r\nProxy-Connection: keep-alive\r\n"
      "proxy-authorization: Basic eDp5\r\nConnection: keep-alive\r\nAccept: */*\r\n\r";
  EXPECT_EQ(origin_form_head(head, "/p?q"),
            "GET /p?q HTTP/1.1\r\nHost: h:8080\r\nAccept: */*\r\nConnection: close\r\n\r");
  // LF-only line ends come out as CRLF, ending the same way.
  EXPECT_EQ(origin_form_head("GET http://h/ HTTP/1.1\nHost: h\n", "/"),
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r");
  // A websocket's upgrade is kept (kubectl exec); a Connection naming
  // upgrade without an Upgrade field is not one.
  EXPECT_EQ(origin_form_head("GET http://h/ws HTTP/1.1\r\nHost: h\r\nconnection: keep-alive, Upgrade\r\n"
                             "Upgrade: websocket\r\n\r",
                             "/ws"),
            "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r");
  EXPECT_EQ(origin_form_head("GET http://h/ HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n\r", "/"),
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r");
}

}  // namespace
