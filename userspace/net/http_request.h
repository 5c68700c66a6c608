// HTTP/1.1 requests as the control APIs see them (method, path, query, lower-case
// headers, body), the replies they give, and the incremental parser that reads
// requests off a connection (Node's http-parser underneath, with our limits).
// Untrusted bytes: fuzzed in selftests/fuzz/http_request_fuzz.cpp.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline {

// Who is at the other end of a connection. A unix socket carries the peer's
// credentials (SO_PEERCRED, taken at connect time); TCP carries an address.
struct HttpPeer {
  bool has_credentials = false;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string address;  // "127.0.0.1:40122", or "unix"
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // as sent, without the query: "/v1/faults/3/abort"
  std::string query;   // after '?', as sent (still percent-encoded); empty if none
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;                                          // de-chunked
  bool keep_alive = true;                                    // HTTP/1.1 default, "Connection: close", HTTP/1.0 rules
  HttpPeer peer;
  // Which request this is, unique within its HttpServer: the key of a reply
  // given later (HttpReply::later(), HttpServer::complete()).
  uint64_t exchange = 0;

  // The first header of that name (lower case), if any.
  [[nodiscard]] std::optional<std::string> header(std::string_view lower_name) const;
  // The first query parameter of that name, percent-decoded ('+' is a space).
  // A parameter given without '=' has the empty value.
  [[nodiscard]] std::optional<std::string> query_param(std::string_view name) const;
};

struct HttpReply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Length is added when sent
  std::string body;
  // No answer yet: the handler keeps req.exchange and answers through
  // HttpServer::complete() (a long poll). The connection reads nothing more
  // until then; a client that hangs up meanwhile is closed.
  bool deferred = false;

  [[nodiscard]] static HttpReply json(int status, std::string body);
  [[nodiscard]] static HttpReply text(int status, std::string body);
  // {"error": message, "status": status}: the one error envelope of our APIs.
  [[nodiscard]] static HttpReply error(int status, std::string_view message);
  [[nodiscard]] static HttpReply later();
};

// What a listener does with each request: a router, or any function.
using HttpHandler = std::function<HttpReply(const HttpRequest&)>;

// "%41b" -> "Ab"; nothing on a malformed escape. With plus_is_space, '+' is ' '
// (query strings).
[[nodiscard]] std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);
// "Not Found" for 404; "Unknown" for a code we do not name.
[[nodiscard]] const char* http_reason(int status);

// Reads requests from the bytes of one connection as they arrive, one at a time.
// Strict: what http-parser refuses is a 400 (or 505 for an HTTP version other
// than 1.x); a head over max_head is 431 (a request target alone over it, 414);
// a body over max_body 413, judged on Content-Length before any of it is read, and
// on the bytes of a chunked body as they come. Errors are final: the connection
// answers and closes.
class HttpRequestParser {
 public:
  struct Limits {
    size_t max_head = 8 * 1024;
    size_t max_body = 1024 * 1024;
  };
  enum class State { Reading, Ready, Failed };

  explicit HttpRequestParser(Limits limits);
  ~HttpRequestParser();
  HttpRequestParser(const HttpRequestParser&) = delete;
  HttpRequestParser& operator=(const HttpRequestParser&) = delete;

  // Takes bytes; returns how many were used. Stops after one whole request
  // (state Ready): the caller takes it and feeds the rest again.
  [[nodiscard]] size_t feed(std::string_view bytes);
  [[nodiscard]] State state() const { return state_; }
  // A request has begun (some of it was read) and is not yet whole.
  [[nodiscard]] bool in_request() const { return started_ && state_ == State::Reading; }
  // The request, once Ready; the parser then reads the next one.
  [[nodiscard]] HttpRequest take();
  // The request under way asked for "100 Continue" before sending its body
  // (Expect: 100-continue): true once, when its head is whole.
  [[nodiscard]] bool take_continue_request();
  // Once Failed: the status to answer with and why.
  [[nodiscard]] int error_status() const { return error_status_; }
  [[nodiscard]] const std::string& error_detail() const { return error_detail_; }

 private:
  struct Impl;
  friend struct Impl;
  void fail(int status, std::string detail);

  Limits limits_;
  std::unique_ptr<Impl> impl_;
  State state_ = State::Reading;
  bool started_ = false;
  bool continue_wanted_ = false;
  int error_status_ = 0;
  std::string error_detail_;
};

}  // namespace faultline
