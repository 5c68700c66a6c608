// The request parser over http-parser's callbacks, and the small pieces of a reply.
#include "userspace/net/http_request.h"

#include <http_parser.h>

#include <cctype>
#include <climits>

#include "base/json_quote.h"

namespace faultline {
namespace {

std::string header_name_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// RFC 9110 5.6.2 tchar. Debian builds http-parser without HTTP_PARSER_STRICT,
// which lets a space into a field name ("Content Length: 5"): a name two
// servers could read differently, so it is refused here.
bool is_field_name_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (std::isalnum(u)) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_field_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_field_name_char(c)) return false;
  }
  return true;
}

// The request target in visible ASCII only (the lenient parser also takes tabs,
// form feeds and bytes over 0x7f).
bool is_visible_target(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) return v;
  }
  return std::nullopt;
}

std::optional<std::string> HttpRequest::query_param(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view{} : q.substr(amp + 1);
    size_t eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq), true);
    if (!key || *key != name) continue;
    if (eq == std::string_view::npos) return std::string();
    return percent_decode(pair.substr(eq + 1), true);
  }
  return std::nullopt;
}

HttpReply HttpReply::json(int status, std::string body) {
  return HttpReply{status, {{"Content-Type", "application/json"}}, std::move(body)};
}

HttpReply HttpReply::text(int status, std::string body) {
  return HttpReply{status, {{"Content-Type", "text/plain; charset=utf-8"}}, std::move(body)};
}

HttpReply HttpReply::later() {
  HttpReply r;
  r.deferred = true;
  return r;
}

HttpReply HttpReply::error(int status, std::string_view message) {
  return json(status, "{\"error\":" + json_quote(message) + ",\"status\":" + std::to_string(status) + "}\n");
}

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

const char* http_reason(int status) {
  if (status < 100 || status > 599) return "Unknown";
  const char* s = http_status_str(static_cast<http_status>(status));
  return s && *s && std::string_view(s) != "<unknown>" ? s : "Unknown";
}

// http-parser's state and its callbacks, which build the request in place.
struct HttpRequestParser::Impl {
  HttpRequestParser* owner;
  http_parser parser{};
  http_parser_settings settings{};
  HttpRequest req;
  std::string url;
  std::string field, value;  // the header being read
  bool in_value = false;
  size_t head_bytes = 0;
  bool complete = false;

  explicit Impl(HttpRequestParser* o) : owner(o) {
    settings.on_message_begin = [](http_parser* p) { return self(p)->begin(); };
    settings.on_url = [](http_parser* p, const char* at, size_t n) { return self(p)->on_url(at, n); };
    settings.on_header_field = [](http_parser* p, const char* at, size_t n) { return self(p)->on_field(at, n); };
    settings.on_header_value = [](http_parser* p, const char* at, size_t n) { return self(p)->on_value(at, n); };
    settings.on_headers_complete = [](http_parser* p) { return self(p)->headers_done(); };
    settings.on_body = [](http_parser* p, const char* at, size_t n) { return self(p)->on_body(at, n); };
    settings.on_message_complete = [](http_parser* p) { return self(p)->message_done(); };
    reset();
  }

  static Impl* self(http_parser* p) { return static_cast<Impl*>(p->data); }

  void reset() {
    http_parser_init(&parser, HTTP_REQUEST);
    parser.data = this;
  }

  int begin() {
    owner->started_ = true;
    req = HttpRequest{};
    url.clear();
    field.clear();
    value.clear();
    in_value = false;
    head_bytes = 0;
    complete = false;
    return 0;
  }

  // Counts head bytes as the callbacks see them; false (and the parser failed)
  // once over the limit.
  bool count_head(size_t n) {
    head_bytes += n;
    if (head_bytes <= owner->limits_.max_head) return true;
    owner->fail(431, "the request head is larger than " + std::to_string(owner->limits_.max_head) + " bytes");
    return false;
  }

  int on_url(const char* at, size_t n) {
    if (url.size() + n > owner->limits_.max_head) {
      owner->fail(414, "the request target is longer than " + std::to_string(owner->limits_.max_head) + " bytes");
      return 1;
    }
    url.append(at, n);
    return count_head(n) ? 0 : 1;
  }

  // False (and the parser failed) for a field name that is not a token.
  bool end_header() {
    if (!field.empty() || in_value) {
      if (!is_field_name(field)) {
        owner->fail(400, "malformed request: a header name that is not a token");
        return false;
      }
      req.headers.emplace_back(header_name_lower(field), value);
    }
    field.clear();
    value.clear();
    in_value = false;
    return true;
  }

  int on_field(const char* at, size_t n) {
    if (in_value && !end_header()) return 1;
    field.append(at, n);
    return count_head(n) ? 0 : 1;
  }

  int on_value(const char* at, size_t n) {
    in_value = true;
    value.append(at, n);
    return count_head(n) ? 0 : 1;
  }

  int headers_done() {
    if (!end_header()) return -1;
    if (parser.http_major != 1) {
      owner->fail(505, "only HTTP/1.x is served");
      return -1;
    }
    req.method = http_method_str(static_cast<http_method>(parser.method));
    http_parser_url u{};
    http_parser_url_init(&u);
    if (http_parser_parse_url(url.data(), url.size(), parser.method == HTTP_CONNECT, &u) != 0 ||
        !(u.field_set & (1 << UF_PATH))) {
      owner->fail(400, "the request target is not a path");
      return -1;
    }
    if (!is_visible_target(url)) {
      owner->fail(400, "the request target has a byte that is not visible ASCII");
      return -1;
    }
    req.path = url.substr(u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
    if (req.path.empty() || req.path[0] != '/') {
      owner->fail(400, "the request target is not a path");
      return -1;
    }
    if (u.field_set & (1 << UF_QUERY)) req.query = url.substr(u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len);
    req.keep_alive = http_should_keep_alive(&parser) != 0;
    if (auto expect = req.header("expect");
        expect && header_name_lower(*expect) == "100-continue" && parser.http_minor >= 1)
      owner->continue_wanted_ = true;
    // A Content-Length over the limit is refused before any of the body is read.
    if (!(parser.flags & F_CHUNKED) && parser.content_length != ULLONG_MAX &&
        parser.content_length > owner->limits_.max_body) {
      owner->fail(413, "the request body is larger than " + std::to_string(owner->limits_.max_body) + " bytes");
      return -1;
    }
    return 0;
  }

  int on_body(const char* at, size_t n) {
    if (req.body.size() + n > owner->limits_.max_body) {
      owner->fail(413, "the request body is larger than " + std::to_string(owner->limits_.max_body) + " bytes");
      return 1;
    }
    req.body.append(at, n);
    return 0;
  }

  int message_done() {
    complete = true;
    // An upgrade (or CONNECT) hands the connection to another protocol, which
    // no API here speaks: answer this request, then close.
    if (parser.upgrade) req.keep_alive = false;
    http_parser_pause(&parser, 1);  // one request at a time: the caller answers it first
    return 0;
  }
};

HttpRequestParser::HttpRequestParser(Limits limits) : limits_(limits), impl_(std::make_unique<Impl>(this)) {}

HttpRequestParser::~HttpRequestParser() = default;

void HttpRequestParser::fail(int status, std::string detail) {
  if (state_ == State::Failed) return;
  state_ = State::Failed;
  error_status_ = status;
  error_detail_ = std::move(detail);
}

size_t HttpRequestParser::feed(std::string_view bytes) {
  if (state_ != State::Reading || bytes.empty()) return 0;
  http_parser& p = impl_->parser;
  if (HTTP_PARSER_ERRNO(&p) == HPE_PAUSED) http_parser_pause(&p, 0);
  size_t used = http_parser_execute(&p, &impl_->settings, bytes.data(), bytes.size());
  if (impl_->complete) {
    state_ = State::Ready;
    return used;
  }
  if (state_ == State::Failed) return used;  // a limit, set by a callback
  auto err = HTTP_PARSER_ERRNO(&p);
  if (err == HPE_HEADER_OVERFLOW) {
    fail(431, "the request head is larger than the parser allows");
  } else if (err == HPE_INVALID_VERSION) {
    fail(505, "only HTTP/1.x is served");
  } else if (err != HPE_OK) {
    fail(400, std::string("malformed request: ") + http_errno_description(err));
  } else if (p.upgrade) {
    fail(400, "malformed request: an upgrade without a whole request");
  }
  return used;
}

bool HttpRequestParser::take_continue_request() { return std::exchange(continue_wanted_, false); }

HttpRequest HttpRequestParser::take() {
  HttpRequest out = std::move(impl_->req);
  impl_->req = HttpRequest{};
  impl_->complete = false;
  started_ = false;
  continue_wanted_ = false;
  state_ = State::Reading;
  return out;
}

}  // namespace faultline
