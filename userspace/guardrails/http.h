// The HTTP/1.x pieces the health probe needs: a URL and a response status line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace faultline {

struct HttpUrl {
  std::string host;  // literal address or name
  uint16_t port = 80;
  std::string path = "/";
};

// "http://host[:port][/path]". https is refused with a message saying so.
[[nodiscard]] Result<HttpUrl> parse_http_url(const std::string& url);

struct HttpStatus {
  int major = 1;
  int minor = 1;
  int code = 0;
};

// Parses the first line of a response ("HTTP/1.1 200 OK\r\n"). Untrusted bytes:
// fuzzed in selftests/fuzz.
[[nodiscard]] Result<HttpStatus> parse_status_line(std::string_view bytes);

}  // namespace faultline
