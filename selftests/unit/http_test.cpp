// The guardrails' HTTP parsers: URLs, status lines and whole responses.
#include "userspace/guardrails/http.h"

#include <gtest/gtest.h>

namespace faultline {
namespace {

TEST(HttpUrl, Forms) {
  auto u = parse_http_url("http://10.0.0.2:8080/healthz?x=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "10.0.0.2");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->path, "/healthz?x=1");
  auto six = parse_http_url("http://[fd00::2]:81");
  ASSERT_TRUE(six.ok());
  EXPECT_EQ(six->host, "fd00::2");
  EXPECT_EQ(six->path, "/");
  EXPECT_EQ(parse_http_url("http://localhost")->port, 80);
}

TEST(HttpUrl, Refusals) {
  for (const char* bad : {"http://", "http://:80/", "http://h:/", "http://h:0/", "http://[::1/", "http://u@h/",
                          "http://h/a b", "https://", "h:80"}) {
    EXPECT_FALSE(parse_http_url(bad).ok()) << bad;
  }
}

TEST(HttpStatus, Lines) {
  auto s = parse_status_line("HTTP/1.1 200 OK\r\nServer: x\r\n");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->code, 200);
  EXPECT_EQ(parse_status_line("HTTP/1.0 503\r\n")->code, 503);
  for (const char* bad : {"", "HTTP/1.1 200 OK", "HTTP/x.1 200 OK\r\n", "HTTP/1.1 20 OK\r\n", "HTTP/1.1 2000 OK\r\n",
                          "SSH-2.0-OpenSSH\r\n", "HTTP/1.1 099 X\r\n"}) {
    EXPECT_FALSE(parse_status_line(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace faultline

namespace faultline {
namespace {

TEST(HttpUrl, Https) {
  auto u = parse_http_url("https://health.example/ready");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->host_header(), "health.example");
  EXPECT_EQ(u->text(), "https://health.example/ready");
  auto v6 = parse_http_url("https://[::1]:8443/");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host_header(), "[::1]:8443");
  EXPECT_EQ(parse_http_url("http://h:80/")->host_header(), "h");
  EXPECT_EQ(parse_http_url("http://h:443/")->host_header(), "h:443");
  for (const char* bad : {"https://", "https://h/#frag", "http://h?x=1", "https://u:p@h/"})
    EXPECT_FALSE(parse_http_url(bad).ok()) << bad;
}

TEST(HttpUrl, Encoding) {
  EXPECT_EQ(url_encode("sum(rate(x{a=\"b c\"}[5m])) > 0.5"),
            "sum%28rate%28x%7Ba%3D%22b%20c%22%7D%5B5m%5D%29%29%20%3E%200.5");
  EXPECT_EQ(url_encode("A-z_0.9~"), "A-z_0.9~");
}

// Feeds the response one byte at a time (every read boundary is crossed), then the close.
Result<HttpResponse> read_bytewise(std::string_view bytes, HttpResponseReader::Limits l = {}) {
  HttpResponseReader r(l);
  for (char c : bytes) {
    auto done = r.feed(std::string_view(&c, 1));
    if (!done) return done.error();
    if (*done) return r.take();
  }
  FL_TRY(r.close());
  return r.take();
}

Result<HttpResponse> read_whole(std::string_view bytes, HttpResponseReader::Limits l = {}) {
  HttpResponseReader r(l);
  auto done = r.feed(bytes);
  if (!done) return done.error();
  if (!*done) FL_TRY(r.close());
  return r.take();
}

TEST(HttpResponse, ContentLength) {
  const std::string in = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  b \r\n\r\nhelloIGNORED";
  for (auto* read : {&read_bytewise, &read_whole}) {
    auto r = (*read)(in, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status.code, 200);
    EXPECT_EQ(r->body, "hello");
    EXPECT_EQ(r->header("x-a"), "b");
  }
}

TEST(HttpResponse, Chunked) {
  const std::string in =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n5;name=x\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\n"
      "Trailer-A: 1\r\n\r\n";
  for (auto* read : {&read_bytewise, &read_whole}) {
    auto r = (*read)(in, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->body, "hello 0123456789");
  }
}

TEST(HttpResponse, UntilCloseInterimAndNoBody) {
  auto close = read_bytewise("HTTP/1.0 200 ok\nContent-type: text/html\n\n<HTML>up</HTML>\n");
  ASSERT_TRUE(close.ok()) << close.error().message;
  EXPECT_EQ(close->body, "<HTML>up</HTML>\n");
  auto interim =
      read_bytewise("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 302 Found\r\nLocation: /login\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(interim.ok()) << interim.error().message;
  EXPECT_EQ(interim->status.code, 302);
  EXPECT_EQ(interim->header("location"), "/login");
  auto none = read_bytewise("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n");
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(none->body, "");
}

TEST(HttpResponse, Refusals) {
  const HttpResponseReader::Limits small{.max_head = 128, .max_body = 16};
  struct Case {
    std::string in;
    const char* says;
  };
  const Case cases[] = {
      {"SSH-2.0-OpenSSH_9.2\r\n", "not an HTTP response"},
      {"", "closed before a response"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", "conflicting Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello!", "conflicting Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", "both Transfer-Encoding"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "unsupported Transfer-Encoding"},
      {"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n", "folded header"},
      {"HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n", "bad header name"},
      {"HTTP/1.1 200 OK\r\n: a\r\n\r\n", "without a name"},
      {"HTTP/1.1 200 OK\r\nX: a\x01\r\n\r\n", "control character"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n", "over the limit"},
      {"HTTP/1.1 200 OK\r\n\r\n01234567890123456", "body over 16"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n", "body over 16"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", "longer than its size"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1 x\r\n", "bad chunk size"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000001\r\n", "chunk size too large"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab", "closed in the middle of the response body"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab", "closed in the middle of the response body"},
      {"HTTP/1.1 200 OK\r\nX: 1\r\n", "closed in the middle of the response head"},
      {"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101"},
      {"HTTP/1.1 200 OK\r\nX: " + std::string(200, 'a') + "\r\n\r\n", "head over 128"},
  };
  for (const auto& c : cases) {
    for (auto* read : {&read_bytewise, &read_whole}) {
      auto r = (*read)(c.in, small);
      ASSERT_FALSE(r.ok()) << "accepted: " << c.in;
      EXPECT_NE(r.error().message.find(c.says), std::string::npos) << c.in << "\n -> " << r.error().message;
    }
  }
}

}  // namespace
}  // namespace faultline
