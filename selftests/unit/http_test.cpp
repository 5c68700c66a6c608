// The health probe's URL and status-line parsers.
#include <gtest/gtest.h>

#include "userspace/guardrails/http.h"

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
                          "http://h/a b", "https://h/", "h:80"}) {
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
