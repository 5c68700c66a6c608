// The HTTP/1.x pieces the guardrails need, as pure functions over bytes: a URL,
// a response status line, and a whole response (head and body) read as it
// arrives. No sockets here: the client that uses them is http_client.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace faultline {

struct HttpUrl {
  bool tls = false;  // https://
  std::string host;  // literal address or name (an IPv6 literal without brackets)
  uint16_t port = 80;
  std::string path = "/";  // with the query string, if any

  // "host", "host:port" or "[v6]:port": the Host header (RFC 9110 7.2), the port
  // only when it is not the scheme's default.
  [[nodiscard]] std::string host_header() const;
  // The URL back as text (for messages and records).
  [[nodiscard]] std::string text() const;
};

// "http[s]://host[:port][/path]". Credentials in the URL are refused (they would
// end up in records), as are spaces and control characters.
[[nodiscard]] Result<HttpUrl> parse_http_url(const std::string& url);

// Percent-encodes everything but RFC 3986 unreserved characters, for a query
// parameter's value.
[[nodiscard]] std::string url_encode(std::string_view s);

struct HttpStatus {
  int major = 1;
  int minor = 1;
  int code = 0;
};

// Parses the first line of a response ("HTTP/1.1 200 OK\r\n"). Untrusted bytes:
// fuzzed in selftests/fuzz.
[[nodiscard]] Result<HttpStatus> parse_status_line(std::string_view bytes);

struct HttpResponse {
  HttpStatus status;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case, values trimmed
  std::string body;                                          // de-chunked

  // The first header of that name (lower case), if any.
  [[nodiscard]] std::optional<std::string> header(std::string_view lower_name) const;
};

// Reads one HTTP/1.x response to a GET from the bytes of a connection as they
// come: the head, then a body framed by Transfer-Encoding: chunked, by
// Content-Length, or by the close (RFC 9112 6.3). Interim 1xx responses are
// skipped. Strict where a lenient reader could be steered (two different
// lengths, an unknown transfer coding, folded headers, oversized parts).
// Untrusted bytes: fuzzed in selftests/fuzz.
class HttpResponseReader {
 public:
  struct Limits {
    size_t max_head = 64 * 1024;
    size_t max_body = 4 * 1024 * 1024;
  };
  HttpResponseReader() : HttpResponseReader(Limits{}) {}
  explicit HttpResponseReader(Limits limits) : limits_(limits) {}

  // Takes the next bytes. True once the response is whole; bytes after it are
  // ignored. An error is final.
  [[nodiscard]] Result<bool> feed(std::string_view bytes);
  // The peer closed the connection: ends a body that runs to the close. An
  // error if the response was cut short.
  [[nodiscard]] Status close();

  [[nodiscard]] bool done() const { return state_ == State::Done; }
  // The status line has been read (the response has begun; for latency).
  [[nodiscard]] bool has_status() const { return has_status_; }
  [[nodiscard]] const HttpResponse& response() const { return resp_; }
  [[nodiscard]] HttpResponse take() { return std::move(resp_); }

 private:
  enum class State { Head, Length, UntilClose, ChunkSize, ChunkData, ChunkDataEnd, Trailers, Done, Failed };
  [[nodiscard]] Result<bool> step();
  [[nodiscard]] std::optional<std::string_view> next_line();
  [[nodiscard]] Status parse_head(std::string_view head);
  [[nodiscard]] Status start_body();
  [[nodiscard]] Result<bool> take_body_bytes(State next);

  Limits limits_;
  State state_ = State::Head;
  std::string buf_;
  size_t pos_ = 0;        // bytes of buf_ already consumed
  size_t remaining_ = 0;  // of a Content-Length body, or of the current chunk
  size_t trailer_bytes_ = 0;
  bool has_status_ = false;
  HttpResponse resp_;
};

}  // namespace faultline
