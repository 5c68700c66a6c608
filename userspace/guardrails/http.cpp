// URL, status-line and response parsing, strict about what they accept: every
// byte here comes from a server the guardrail does not control.
#include "userspace/guardrails/http.h"

#include <algorithm>
#include <cctype>
#include <iterator>

namespace faultline {
namespace {

constexpr size_t kMaxChunkLine = 4096;

bool is_tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The line's own bytes, without its "\n" or "\r\n".
std::string_view strip_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// Splits a comma-separated header value into trimmed, non-empty elements.
std::vector<std::string_view> list_elements(std::string_view v) {
  std::vector<std::string_view> out;
  while (!v.empty()) {
    auto comma = v.find(',');
    std::string_view e = trim(v.substr(0, comma));
    if (!e.empty()) out.push_back(e);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

std::string HttpUrl::host_header() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != (tls ? 443 : 80)) h += ":" + std::to_string(port);
  return h;
}

std::string HttpUrl::text() const { return std::string(tls ? "https://" : "http://") + host_header() + path; }

Result<HttpUrl> parse_http_url(const std::string& url) {
  HttpUrl u;
  std::string rest;
  if (url.rfind("https://", 0) == 0) {
    u.tls = true;
    u.port = 443;
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else {
    return make_error(EINVAL, "'" + url + "' is not an http:// or https:// URL");
  }
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) u.path = rest.substr(slash);
  for (char c : u.path) {
    if (c <= ' ' || c == 0x7f) return make_error(EINVAL, "'" + url + "' has a space or control character in its path");
  }
  if (u.path.find('#') != std::string::npos) return make_error(EINVAL, "'" + url + "' has a #fragment");
  if (authority.empty()) return make_error(EINVAL, "'" + url + "' has no host");
  if (authority.find('@') != std::string::npos)
    return make_error(EINVAL, "'" + url + "': credentials in the URL are not supported");
  if (authority.find('?') != std::string::npos)
    return make_error(EINVAL, "'" + url + "': a query needs a path before it ('/?...')");
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
  for (char c : u.host) {
    if (c <= ' ' || c == 0x7f || c == '/' || c == '[' || c == ']')
      return make_error(EINVAL, "'" + url + "' has a bad character in its host");
  }
  if (!port.empty() || authority.back() == ':') {
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
      return make_error(EINVAL, "'" + url + "' has a bad port");
    unsigned long p = std::stoul(port);
    if (p < 1 || p > 65535) return make_error(ERANGE, "'" + url + "': ports are 1-65535");
    u.port = static_cast<uint16_t>(p);
  }
  return u;
}

std::string url_encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
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

std::optional<std::string> HttpResponse::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) return v;
  }
  return std::nullopt;
}

Result<bool> HttpResponseReader::feed(std::string_view bytes) {
  if (state_ == State::Failed) return make_error(EPROTO, "the response was already refused");
  if (state_ == State::Done) return true;
  buf_.append(bytes);
  for (;;) {
    auto progressed = step();
    if (!progressed) {
      state_ = State::Failed;
      return progressed.error();
    }
    if (state_ == State::Done) return true;
    if (!*progressed) break;
  }
  // Consumed bytes go once they are most of the buffer, so a long body is not
  // copied again on every read.
  if (pos_ > 16 * 1024 && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return false;
}

Status HttpResponseReader::close() {
  switch (state_) {
    case State::Done:
      return {};
    case State::UntilClose:
      state_ = State::Done;
      return {};
    case State::Failed:
      return make_error(EPROTO, "the response was already refused");
    case State::Head:
      state_ = State::Failed;
      if (!has_status_ && pos_ == buf_.size()) return make_error(ECONNRESET, "connection closed before a response");
      return make_error(EPROTO, "connection closed in the middle of the response head");
    default:
      state_ = State::Failed;
      return make_error(EPROTO, "connection closed in the middle of the response body (" +
                                    std::to_string(resp_.body.size()) + " bytes read)");
  }
}

std::optional<std::string_view> HttpResponseReader::next_line() {
  auto nl = buf_.find('\n', pos_);
  if (nl == std::string::npos) return std::nullopt;
  std::string_view line = strip_cr(std::string_view(buf_).substr(pos_, nl - pos_));
  pos_ = nl + 1;
  return line;
}

Result<bool> HttpResponseReader::take_body_bytes(State next) {
  size_t n = std::min(remaining_, buf_.size() - pos_);
  resp_.body.append(buf_, pos_, n);
  pos_ += n;
  remaining_ -= n;
  if (remaining_ > 0) return false;
  state_ = next;
  return true;
}

// One step of the state machine: true when it moved on, false when it needs more bytes.
Result<bool> HttpResponseReader::step() {
  const size_t avail = buf_.size() - pos_;
  switch (state_) {
    case State::Head: {
      // A server that is not speaking HTTP is told apart on its first bytes,
      // not at the deadline.
      std::string_view start = std::string_view(buf_).substr(pos_, std::min<size_t>(avail, 5));
      if (start != std::string_view("HTTP/").substr(0, start.size())) return make_error(EPROTO, "not an HTTP response");
      size_t scan = pos_;
      for (;;) {
        auto nl = buf_.find('\n', scan);
        if (nl == std::string::npos) break;
        if (strip_cr(std::string_view(buf_).substr(scan, nl - scan)).empty()) {
          std::string_view head = std::string_view(buf_).substr(pos_, scan - pos_);
          if (head.size() > limits_.max_head) break;
          FL_TRY(parse_head(head));
          pos_ = nl + 1;
          if (resp_.status.code < 200) {  // interim (100 Continue, 103 Early Hints): the answer follows
            if (resp_.status.code == 101) return make_error(EPROTO, "101 Switching Protocols in answer to a GET");
            resp_.headers.clear();
            return true;
          }
          FL_TRY(start_body());
          return true;
        }
        scan = nl + 1;
      }
      if (avail > limits_.max_head)
        return make_error(EMSGSIZE, "response head over " + std::to_string(limits_.max_head) + " bytes");
      return false;
    }
    case State::Length:
      return take_body_bytes(State::Done);
    case State::UntilClose:
      if (resp_.body.size() + avail > limits_.max_body)
        return make_error(EMSGSIZE, "response body over " + std::to_string(limits_.max_body) + " bytes");
      resp_.body.append(buf_, pos_, avail);
      pos_ = buf_.size();
      return false;
    case State::ChunkSize: {
      auto line = next_line();
      if (!line) {
        if (avail > kMaxChunkLine) return make_error(EPROTO, "chunk size line too long");
        return false;
      }
      size_t digits = 0;
      uint64_t size = 0;
      while (digits < line->size() && std::isxdigit(static_cast<unsigned char>((*line)[digits]))) {
        if (digits == 15) return make_error(EPROTO, "chunk size too large");
        char c = static_cast<char>(std::tolower(static_cast<unsigned char>((*line)[digits])));
        size = size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
        ++digits;
      }
      if (digits == 0) return make_error(EPROTO, "bad chunk size line");
      std::string_view after = trim(line->substr(digits));
      if (!after.empty() && after.front() != ';') return make_error(EPROTO, "bad chunk size line");
      if (size == 0) {
        state_ = State::Trailers;
        return true;
      }
      if (size > limits_.max_body - resp_.body.size())
        return make_error(EMSGSIZE, "response body over " + std::to_string(limits_.max_body) + " bytes");
      remaining_ = static_cast<size_t>(size);
      state_ = State::ChunkData;
      return true;
    }
    case State::ChunkData:
      return take_body_bytes(State::ChunkDataEnd);
    case State::ChunkDataEnd: {
      if (avail == 0) return false;
      if (buf_[pos_] != '\r' && buf_[pos_] != '\n') return make_error(EPROTO, "chunk longer than its size");
      auto line = next_line();
      if (!line) {
        if (avail > 1) return make_error(EPROTO, "chunk longer than its size");
        return false;
      }
      if (!line->empty()) return make_error(EPROTO, "chunk longer than its size");
      state_ = State::ChunkSize;
      return true;
    }
    case State::Trailers: {
      auto line = next_line();
      if (!line) {
        if (trailer_bytes_ + avail > limits_.max_head) return make_error(EMSGSIZE, "trailers too long");
        return false;
      }
      trailer_bytes_ += line->size() + 1;
      if (trailer_bytes_ > limits_.max_head) return make_error(EMSGSIZE, "trailers too long");
      if (line->empty()) {
        state_ = State::Done;
        return true;
      }
      if (line->find(':') == std::string_view::npos) return make_error(EPROTO, "bad trailer line");
      return true;
    }
    case State::Done:
    case State::Failed:
      return false;
  }
  return false;
}

Status HttpResponseReader::parse_head(std::string_view head) {
  auto status = parse_status_line(head);
  if (!status) return status.error();
  resp_.status = *status;
  has_status_ = true;
  std::string_view rest = head.substr(head.find('\n') + 1);
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    std::string_view line = strip_cr(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    if (line.empty()) continue;
    if (line.front() == ' ' || line.front() == '\t') return make_error(EPROTO, "folded header line");
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return make_error(EPROTO, "header line without a name");
    std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_tchar)) return make_error(EPROTO, "bad header name");
    std::string_view value = trim(line.substr(colon + 1));
    for (char c : value) {
      auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) return make_error(EPROTO, "control character in a header value");
    }
    resp_.headers.emplace_back(lower(name), std::string(value));
  }
  return {};
}

Status HttpResponseReader::start_body() {
  const int code = resp_.status.code;
  if (code == 204 || code == 304) {
    state_ = State::Done;
    return {};
  }
  std::vector<std::string_view> codings, lengths;
  for (const auto& [k, v] : resp_.headers) {
    if (k == "transfer-encoding") std::ranges::copy(list_elements(v), std::back_inserter(codings));
    if (k == "content-length") std::ranges::copy(list_elements(v), std::back_inserter(lengths));
  }
  bool te = resp_.header("transfer-encoding").has_value(), cl = resp_.header("content-length").has_value();
  if (te && cl) return make_error(EPROTO, "both Transfer-Encoding and Content-Length");
  if (te) {
    if (codings.size() != 1 || lower(codings.front()) != "chunked")
      return make_error(EPROTO, "unsupported Transfer-Encoding (only chunked is read)");
    state_ = State::ChunkSize;
    return {};
  }
  if (cl) {
    if (lengths.empty()) return make_error(EPROTO, "empty Content-Length");
    for (auto l : lengths) {
      if (l != lengths.front()) return make_error(EPROTO, "conflicting Content-Length values");
    }
    std::string_view l = lengths.front();
    if (l.size() > 18 || l.find_first_not_of("0123456789") != std::string_view::npos)
      return make_error(EPROTO, "bad Content-Length");
    uint64_t n = std::stoull(std::string(l));
    if (n > limits_.max_body)
      return make_error(EMSGSIZE, "response body of " + std::to_string(n) + " bytes, over the limit of " +
                                      std::to_string(limits_.max_body));
    remaining_ = static_cast<size_t>(n);
    state_ = n == 0 ? State::Done : State::Length;
    return {};
  }
  state_ = State::UntilClose;
  return {};
}

}  // namespace faultline
