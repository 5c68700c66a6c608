// The HTTP state machine of one proxied connection. http-parser (Node's, in
// Debian as libhttp-parser) fits the relay: it parses whatever bytes it is
// given, keeps its state between calls, never allocates, and can be paused in
// a callback so that parsing stops exactly at the end of a request head or a
// message. Pausing in on_headers_complete returns before the head's last LF:
// that byte is consumed (and forwarded) with the body, so the bytes sent on are
// the bytes received, in order.
#include "userspace/proxy/http_session.h"

#include <fnmatch.h>
#include <http_parser.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <limits>

#include "userspace/proxy/http_answer.h"
#include "userspace/proxy/toxic_plan.h"

namespace faultline {
namespace {

std::string to_lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string_view host_only(std::string_view host) {
  if (!host.empty() && host[0] == '[') {
    size_t end = host.find(']');
    return end == std::string_view::npos ? host : host.substr(0, end + 1);
  }
  size_t colon = host.rfind(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

bool host_matches(std::string_view want, std::string_view host) {
  if (want.find(':') != std::string_view::npos && want[0] != '[') return iequals_ascii(want, host);
  return iequals_ascii(host_only(want), host_only(host));
}

// A prefix ends at a segment boundary: /payments takes /payments and
// /payments/7, not /paymentsX (a prefix ending in / takes what follows it).
bool path_matches(const std::string& want, std::string_view path) {
  if (want.empty()) return true;
  if (want.find_first_of("*?[") != std::string::npos) return ::fnmatch(want.c_str(), std::string(path).c_str(), 0) == 0;
  if (path.substr(0, want.size()) != want) return false;
  return path.size() == want.size() || want.back() == '/' || path[want.size()] == '/';
}

// The SDKs' retry counter: 0 on the first attempt (or when absent).
int64_t retry_count(const std::string& value) {
  int64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
    if (n > 1'000'000) return n;
  }
  return n;
}

// How much of a body is held to fingerprint it (docs/l7.md, "Counting attempts").
constexpr size_t kMaxCollectedBytes = 16u << 20;

bool ends_with_text(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The head with `fields` set (a field of the same name, any case, replaced;
// else added after the others) and the fields named in `drop` removed. The
// head may lack its last LF (the parser's pause): it ends as it did.
std::string set_head_fields(std::string_view head, const std::vector<std::pair<std::string, std::string>>& fields,
                            std::initializer_list<std::string_view> drop = {}) {
  size_t end = head.find('\n');
  while (end != std::string_view::npos && end + 1 < head.size() && head[end + 1] != '\r' && head[end + 1] != '\n')
    end = head.find('\n', end + 1);
  if (end == std::string_view::npos) return std::string(head);
  std::string out;
  out.reserve(head.size() + 64);
  size_t at = head.find('\n') + 1;  // past the request line
  out.append(head.substr(0, at));
  while (at <= end) {
    const size_t nl = head.find('\n', at);
    const std::string_view line = head.substr(at, nl - at + 1);
    const std::string_view name = line.substr(0, line.find(':'));
    bool skip = std::any_of(drop.begin(), drop.end(), [&](std::string_view d) { return iequals_ascii(d, name); }) ||
                std::any_of(fields.begin(), fields.end(), [&](const auto& f) { return iequals_ascii(f.first, name); });
    if (!skip) out.append(line);
    at = nl + 1;
  }
  for (const auto& [k, v] : fields) out.append(k).append(": ").append(v).append("\r\n");
  out.append(head.substr(end + 1));
  return out;
}

}  // namespace

// http-parser's callbacks: parser->data is the session.
struct HttpSession::Parse {
  static HttpSession& of(http_parser* p) { return *static_cast<HttpSession*>(p->data); }

  static int req_url(http_parser* p, const char* at, size_t len) {
    of(p).url_.append(at, len);
    return 0;
  }
  static int req_field(http_parser* p, const char* at, size_t len) {
    HttpSession& s = of(p);
    if (s.headers_.empty() || s.in_value_) s.headers_.emplace_back();
    s.in_value_ = false;
    s.headers_.back().first += to_lower_ascii(std::string_view(at, len));
    return 0;
  }
  static int req_value(http_parser* p, const char* at, size_t len) {
    HttpSession& s = of(p);
    if (s.headers_.empty()) s.headers_.emplace_back();
    s.in_value_ = true;
    s.headers_.back().second.append(at, len);
    return 0;
  }
  static int req_headers_complete(http_parser* p) {
    HttpSession& s = of(p);
    s.head_complete_ = true;
    s.upgrade_ = p->upgrade != 0;
    s.head_method_ = p->method == HTTP_HEAD;
    http_parser_pause(p, 1);
    return 0;
  }
  static int req_body(http_parser* p, const char* at, size_t len) {
    HttpSession& s = of(p);
    if (s.state_ == Req::collect) s.body_hash_.update(std::string_view(at, len));
    if (s.collecting_) {
      s.body_all_.append(at, len);
      s.body_new_.append(at, len);
    }
    return 0;
  }
  static int req_message_complete(http_parser* p) {
    of(p).req_complete_ = true;
    http_parser_pause(p, 1);
    return 0;
  }

  static int resp_field(http_parser* p, const char* at, size_t len) {
    HttpSession& s = of(p);
    if (s.resp_in_value_) {
      s.resp_header_done();
      s.resp_in_value_ = false;
    }
    s.resp_field_.append(at, len);
    return 0;
  }
  static int resp_value(http_parser* p, const char* at, size_t len) {
    HttpSession& s = of(p);
    s.resp_in_value_ = true;
    s.resp_value_.append(at, len);
    return 0;
  }
  static int resp_headers_complete(http_parser* p) {
    HttpSession& s = of(p);
    if (s.resp_in_value_) s.resp_header_done();
    s.resp_in_value_ = false;
    // A HEAD's response, a 1xx, 204 or 304 has no body, whatever its
    // Content-Length says (a 304 may announce the length it would have had;
    // http-parser alone would wait for those bytes).
    const unsigned status = p->status_code;
    return s.head_method_ || status / 100 == 1 || status == 204 || status == 304 ? 1 : 0;
  }
  static int resp_body(http_parser* p, const char* at, size_t len) {
    HttpSession& s = of(p);
    if (s.cut_at_ != std::string::npos) return 0;
    const size_t base = size_t(at - s.exec_base_);
    if (s.action_ == Action::truncate && p->status_code >= 200) {
      if (s.body_seen_ + int64_t(len) >= s.limit_) {
        s.cut_at_ = base + size_t(s.limit_ - s.body_seen_);
        return 0;
      }
    } else if (s.action_ == Action::abort_stream && s.sse_) {
      // Events end at an empty line (LF or CRLF line ends).
      for (size_t i = 0; i < len; ++i) {
        char c = at[i];
        if (c == '\r') continue;
        if (c != '\n') {
          ++s.line_len_;
          continue;
        }
        if (s.line_len_ == 0 && s.event_has_data_) {
          s.event_has_data_ = false;
          if (++s.events_seen_ >= s.limit_) {
            s.cut_at_ = base + i + 1;
            return 0;
          }
        } else if (s.line_len_ > 0) {
          s.event_has_data_ = true;
        }
        s.line_len_ = 0;
      }
    }
    s.body_seen_ += int64_t(len);
    return 0;
  }
  static int resp_message_complete(http_parser* p) {
    http_parser_pause(p, 1);
    return 0;
  }

  static const http_parser_settings& request_settings() {
    static const http_parser_settings st = [] {
      http_parser_settings x{};
      x.on_url = req_url;
      x.on_header_field = req_field;
      x.on_header_value = req_value;
      x.on_headers_complete = req_headers_complete;
      x.on_body = req_body;
      x.on_message_complete = req_message_complete;
      return x;
    }();
    return st;
  }
  static const http_parser_settings& response_settings() {
    static const http_parser_settings st = [] {
      http_parser_settings x{};
      x.on_header_field = resp_field;
      x.on_header_value = resp_value;
      x.on_headers_complete = resp_headers_complete;
      x.on_body = resp_body;
      x.on_message_complete = resp_message_complete;
      return x;
    }();
    return st;
  }
};

HttpSession::HttpSession(std::string upstream_host, uint64_t seed)
    : req_(std::make_unique<http_parser>()),
      resp_(std::make_unique<http_parser>()),
      upstream_host_(std::move(upstream_host)),
      rng_(seed) {
  http_parser_init(req_.get(), HTTP_REQUEST);
  http_parser_init(resp_.get(), HTTP_RESPONSE);
  req_->data = this;
  resp_->data = this;
}

HttpSession::~HttpSession() = default;

void HttpSession::resp_header_done() {
  if (iequals_ascii(resp_field_, "content-type") &&
      to_lower_ascii(resp_value_).find("text/event-stream") != std::string::npos)
    sse_ = true;
  resp_field_.clear();
  resp_value_.clear();
}

std::string HttpSession::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers_)
    if (k == lower_name) return v;
  return {};
}

bool HttpSession::in_head() const { return state_ == Req::head && !head_.empty(); }

bool HttpSession::holds_client() const {
  return state_ == Req::judging || state_ == Req::collect || state_ == Req::body_hold || state_ == Req::body_judging ||
         state_ == Req::connect_rest || state_ == Req::drain || state_ == Req::answer_due || state_ == Req::answered ||
         (state_ == Req::decided && action_ == Action::status);
}

void HttpSession::make_answer(int status, const std::vector<std::pair<std::string, std::string>>& headers,
                              const std::string& body, bool close) {
  // A request that waits for 100 Continue, or whose body is another protocol,
  // may never send the body to drain: answered at once, and the connection closes.
  answer_close_ = close || upgrade_ || !header("expect").empty() || !http_should_keep_alive(req_.get());
  answer_ = compose_http_response(status, headers, body, !answer_close_, head_method_);
}

void HttpSession::head_timed_out() {
  if (!in_head()) return;
  action_ = Action::status;
  make_answer(408, {{"Content-Type", "text/plain"}}, "request head not complete in time\n", true);
  state_ = Req::answer_due;
}

std::shared_ptr<TlsClientContext> upstream_client_for(const HttpTls& tls, std::string_view sni, std::string_view host,
                                                      uint16_t port) {
  const auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  for (const UpstreamTlsClient& u : tls.upstream_clients) {
    if (u.port != port) continue;
    for (const std::string& h : u.hosts)
      if ((!sni.empty() && same(h, sni)) || (!host.empty() && same(h, host))) return u.client;
  }
  return tls.client;
}

const HttpFaultEntry* fault_by_sni(const HttpRules& rules, std::string_view sni, uint16_t port, uint64_t& rng) {
  const std::string host = std::string(sni) + ":" + std::to_string(port);
  for (const HttpFaultEntry& e : rules.faults) {
    const HttpFault& f = e.fault;
    if (!needs_plaintext(f).empty()) continue;
    if (!f.match.host.empty() && !host_matches(f.match.host, host)) continue;
    if (f.first_n > 0 && e.matched->fetch_add(1, std::memory_order_relaxed) >= f.first_n) continue;
    if (f.percent < 100) {
      rng += 0x9e3779b97f4a7c15ULL;
      if (double(splitmix64(rng) % 1'000'000) / 10'000.0 >= f.percent) continue;
    }
    e.hits->fetch_add(1, std::memory_order_relaxed);
    return &e;
  }
  return nullptr;
}

// The request's host, path and method as the faults match them.
HttpSession::RequestView HttpSession::request_view() const {
  RequestView v;
  v.host = header("host");
  if (v.host.empty()) v.host = upstream_host_;
  std::string_view path = url_;
  if (size_t q = path.find_first_of("?#"); q != std::string_view::npos) path = path.substr(0, q);
  if (path.rfind("http://", 0) == 0 || path.rfind("https://", 0) == 0) {  // absolute form
    size_t slash = path.find('/', path.find("//") + 2);
    path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
  }
  v.path = std::string(path);
  v.method = http_method_str(static_cast<http_method>(req_->method));
  return v;
}

bool HttpSession::head_matches(const HttpMatch& m, const RequestView& v) const {
  if (!m.host.empty() && !host_matches(m.host, v.host)) return false;
  if (!m.method.empty() && m.method != v.method) return false;
  if (!path_matches(m.path, v.path)) return false;
  return std::all_of(m.headers.begin(), m.headers.end(), [&](const HeaderMatch& h) {
    for (const auto& [k, v] : headers_)
      if (k == h.name && (h.has_equals ? v == h.equals : v.find(h.contains) != std::string::npos)) return true;
    return false;
  });
}

// A body is read before deciding only when it can change the decision: a fault
// counting attempts matches the head and there is a body. Not when the client
// waits for 100 Continue before sending it (it would wait forever) or the
// request upgrades the connection.
bool HttpSession::fault_needs_body(const HttpRules& rules) const {
  if (upgrade_ || !header("expect").empty()) return false;
  const bool has_body = (req_->flags & F_CHUNKED) != 0 ||
                        (req_->content_length > 0 && req_->content_length != std::numeric_limits<uint64_t>::max());
  if (!has_body) return false;
  const RequestView v = request_view();
  return std::any_of(rules.faults.begin(), rules.faults.end(),
                     [&](const HttpFaultEntry& e) { return e.fault.attempts > 0 && head_matches(e.fault.match, v); });
}

void HttpSession::decide_or_collect(const HttpRules& rules) {
  body_hash_ = BodyHash();
  if (fault_needs_body(rules)) {
    state_ = Req::collect;
    return;
  }
  decide(rules);
  state_ = Req::decided;
}

// The first fault whose match, attempts and percent take this request.
void HttpSession::decide(const HttpRules& rules) {
  action_ = Action::pass;
  delay_ms_ = 0;
  slept_ = false;
  const RequestView view = request_view();
  const std::string_view host = view.host;
  const std::string_view path = view.path;
  for (const HttpFaultEntry& e : rules.faults) {
    const HttpFault& f = e.fault;
    if (!head_matches(f.match, view)) continue;
    // first_n: the first N requests its match takes (each then judged by
    // attempts and percent as always); every later one passes it.
    if (f.first_n > 0 && e.matched->fetch_add(1, std::memory_order_relaxed) >= f.first_n) continue;
    if (f.attempts > 0) {
      const RequestFingerprint fp{client_, view.method, view.path, body_hash_.value()};
      const int64_t n =
          e.attempts->attempt(fp, retry_count(header("x-stainless-retry-count")), AttemptCounter::Clock::now());
      if (n >= f.attempts) {
        e.attempts->settle(fp);
        continue;
      }
    }
    if (f.percent < 100) {
      rng_ += 0x9e3779b97f4a7c15ULL;
      if (double(splitmix64(rng_) % 1'000'000) / 10'000.0 >= f.percent) continue;
    }
    e.hits->fetch_add(1, std::memory_order_relaxed);
    switch (f.type) {
      case HttpFaultType::status: {
        std::vector<std::pair<std::string, std::string>> hs;
        if (!f.body.empty()) hs.emplace_back("Content-Type", f.content_type.empty() ? "text/plain" : f.content_type);
        hs.insert(hs.end(), f.headers.begin(), f.headers.end());
        action_ = Action::status;
        delay_ms_ = uint64_t(f.delay_ms);
        make_answer(int(f.status), hs, f.body, false);
        break;
      }
      case HttpFaultType::delay:
        action_ = f.where == DelayPoint::request ? Action::delay_request : Action::delay_response;
        delay_ms_ = uint64_t(f.delay_ms);
        break;
      case HttpFaultType::reset:
        action_ = Action::reset;
        break;
      case HttpFaultType::truncate:
        action_ = Action::truncate;
        limit_ = f.bytes;
        break;
      case HttpFaultType::abort_stream:
        action_ = Action::abort_stream;
        limit_ = f.events;
        break;
      case HttpFaultType::llm: {
        if (f.preset == LlmPreset::stream_cut) {
          action_ = Action::abort_stream;
          limit_ = f.events;
          break;
        }
        LlmProvider provider = f.provider;
        if (provider == LlmProvider::automatic)
          provider = infer_llm_provider(host, path, !header("anthropic-version").empty());
        rng_ += 0x9e3779b97f4a7c15ULL;
        LlmAnswer a = llm_answer(f.preset, provider, f.retry_after_s, splitmix64(rng_), std::time(nullptr));
        action_ = Action::status;
        delay_ms_ = f.preset == LlmPreset::timeout ? uint64_t(f.delay_ms) : 0;
        make_answer(a.status, a.headers, a.body, false);
        break;
      }
    }
    return;
  }
}

HttpStep HttpSession::client_step(std::string_view input, const HttpRules& rules) {
  for (;;) {
    switch (state_) {
      case Req::head: {
        if (input.empty()) return {HttpAct::more};
        size_t n = http_parser_execute(req_.get(), &Parse::request_settings(), input.data(), input.size());
        const auto err = HTTP_PARSER_ERRNO(req_.get());
        if (err != HPE_OK && err != HPE_PAUSED) {
          action_ = Action::status;
          make_answer(400, {{"Content-Type", "text/plain"}},
                      std::string("malformed request: ") + http_errno_description(err) + "\n", true);
          state_ = Req::answer_due;
          return {HttpAct::drop, input.size()};
        }
        head_.append(input.data(), n);
        if (head_.size() > rules.limits.max_header_bytes || headers_.size() > rules.limits.max_headers) {
          action_ = Action::status;
          make_answer(431, {{"Content-Type", "text/plain"}}, "request header fields too large\n", true);
          state_ = Req::answer_due;
          return {HttpAct::drop, n};
        }
        if (head_complete_) {
          http_parser_pause(req_.get(), 0);
          if (judged_) {
            judge_asked_ = false;
            state_ = Req::judging;
          } else {
            decide_or_collect(rules);
          }
        }
        return {HttpAct::consume, n};
      }
      case Req::collect: {
        // The body goes into head_ as it came, to be sent with it (or dropped
        // with it) once decided; a body past the cap is decided on its start.
        if (req_complete_ || head_.size() > kMaxCollectedBytes) {
          decide(rules);
          state_ = Req::decided;
          continue;
        }
        if (input.empty()) return {HttpAct::more};
        size_t n = http_parser_execute(req_.get(), &Parse::request_settings(), input.data(), input.size());
        const auto err = HTTP_PARSER_ERRNO(req_.get());
        if (err != HPE_OK && err != HPE_PAUSED) {  // decided as it is; Req::body relays the rest untouched
          decide(rules);
          state_ = Req::decided;
          continue;
        }
        head_.append(input.data(), n);
        return {HttpAct::consume, n};
      }
      case Req::judging:
        if (judge_asked_) return {HttpAct::wait};
        judge_asked_ = true;
        return {HttpAct::judge};
      case Req::body_hold: {
        // The body for the judge: held as received, never forwarded yet. Only
        // up to the cap is read; the rest waits in the client's buffer. A
        // client waiting for 100 Continue is told to send it.
        if (continue_due_) {
          continue_due_ = false;
          // Nothing of the body yet: at most the head's last LF (the parser
          // paused before it).
          if (input.size() <= 1 && held_raw_.empty()) {
            continue_sent_ = true;
            return {HttpAct::interim};
          }
        }
        const size_t cap = rules.limits.max_body_hold_bytes;
        if (!req_complete_ && held_raw_.size() >= cap) body_end_ = body_over_cap_ = true;
        if (req_complete_) body_end_ = true;
        if (body_end_) {
          state_ = Req::body_judging;
          judge_asked_ = false;
          continue;
        }
        if (input.empty()) return {HttpAct::more};
        const std::string_view in = input.substr(0, cap - held_raw_.size());
        collecting_ = true;
        size_t n = http_parser_execute(req_.get(), &Parse::request_settings(), in.data(), in.size());
        collecting_ = false;
        const auto err = HTTP_PARSER_ERRNO(req_.get());
        if (err != HPE_OK && err != HPE_PAUSED) {
          action_ = Action::status;
          make_answer(400, {{"Content-Type", "text/plain"}},
                      std::string("malformed request body: ") + http_errno_description(err) + "\n", true);
          state_ = Req::answer_due;
          return {HttpAct::drop, input.size()};
        }
        held_raw_.append(in.data(), n);
        if (req_complete_) body_end_ = true;
        if (!body_new_.empty() || body_end_) {
          state_ = Req::body_judging;
          judge_asked_ = false;
        }
        return {HttpAct::consume, n};
      }
      case Req::body_judging:
        if (judge_asked_) return {HttpAct::wait};
        judge_asked_ = true;
        return {HttpAct::judge_body};
      case Req::connect_rest: {
        // The CONNECT head's last LF (held back by the pause at headers
        // complete) belongs to the head, not to the tunnel.
        state_ = Req::answer_due;
        if (!input.empty() && input.front() == '\n') return {HttpAct::drop, 1};
        continue;
      }
      case Req::decided:
        switch (action_) {
          case Action::reset:
            state_ = Req::closed;
            return {HttpAct::reset};
          case Action::status:
            state_ = Req::drain;
            continue;
          case Action::delay_request:
            if (!slept_) {
              slept_ = true;
              return {HttpAct::sleep, 0, delay_ms_};
            }
            [[fallthrough]];
          default:
            state_ = upgrade_ ? Req::tunnel : Req::body;
            return {HttpAct::send_head};
        }
      case Req::body:
        if (req_complete_) {
          state_ = Req::done;
          if (resp_complete_) {
            exchange_done();
            continue;
          }
          return {HttpAct::wait};
        }
        if (input.empty()) return {HttpAct::more};
        {
          size_t n = http_parser_execute(req_.get(), &Parse::request_settings(), input.data(), input.size());
          const auto err = HTTP_PARSER_ERRNO(req_.get());
          if (err != HPE_OK && err != HPE_PAUSED) {  // a body the parser cannot follow: relay it as it is
            state_ = Req::tunnel;
            tunnel_ = true;
            kick_ = true;
            return {HttpAct::forward, input.size()};
          }
          return {HttpAct::forward, n};
        }
      case Req::drain:
        if (req_complete_ || answer_close_) {
          state_ = Req::answer_due;
          continue;
        }
        if (input.empty()) return {HttpAct::more};
        {
          size_t n = http_parser_execute(req_.get(), &Parse::request_settings(), input.data(), input.size());
          const auto err = HTTP_PARSER_ERRNO(req_.get());
          if (err != HPE_OK && err != HPE_PAUSED) {
            answer_close_ = true;
            state_ = Req::answer_due;
            return {HttpAct::drop, input.size()};
          }
          return {HttpAct::drop, n};
        }
      case Req::answer_due:
        if (delay_ms_ > 0 && !slept_) {
          slept_ = true;
          return {HttpAct::sleep, 0, delay_ms_};
        }
        state_ = Req::answered;
        return {HttpAct::respond};
      case Req::answered:
      case Req::done:
      case Req::closed:
        return {HttpAct::wait};
      case Req::tunnel:
        if (input.empty()) return {HttpAct::more};
        return {HttpAct::forward, input.size()};
    }
  }
}

std::string HttpSession::method() const { return http_method_str(static_cast<http_method>(req_->method)); }

void HttpSession::verdict_need_body() {
  if (state_ != Req::judging) return;
  reset_body_stage();
  body_held_ = true;
  continue_due_ = req_->http_major == 1 && req_->http_minor >= 1 && iequals_ascii(header("expect"), "100-continue");
  state_ = Req::body_hold;
}

HttpSession::BodyPiece HttpSession::take_body_chunk() {
  BodyPiece piece{std::exchange(body_new_, {}), body_end_, body_over_cap_};
  return piece;
}

void HttpSession::body_more() {
  if (state_ == Req::body_judging && !body_end_) state_ = Req::body_hold;
}

void HttpSession::plan_forward(std::vector<std::pair<std::string, std::string>> set_headers,
                               std::shared_ptr<ByteTransformer> request_body) {
  plan_headers_ = std::move(set_headers);
  plan_body_ = std::move(request_body);
}

void HttpSession::reset_body_stage() {
  held_raw_ = {};
  body_all_ = {};
  body_new_ = {};
  body_end_ = body_over_cap_ = body_held_ = false;
  continue_due_ = continue_sent_ = false;
  plan_headers_.clear();
  plan_body_.reset();
}

// The head as it goes upstream, followed by the body held for the judge: as
// received, or (held whole, with a transformer) transformed and re-framed
// with its new Content-Length.
void HttpSession::apply_forward_plan() {
  std::string raw = std::move(held_raw_);
  std::string lf;  // the head's last LF, read with the body (the parser paused before it)
  if (!raw.empty() && raw.front() == '\n' && !ends_with_text(head_, "\n\n") && !ends_with_text(head_, "\n\r\n")) {
    lf = "\n";
    raw.erase(0, 1);
  }
  // The client has had its 100 Continue (and sent the body): the upstream
  // gets the body at once, not an Expect to answer with a second one.
  const std::string_view sent_expect = continue_sent_ ? "expect" : "";
  if (plan_body_ && body_held_ && body_end_ && !body_over_cap_) {
    std::string body = plan_body_->feed(body_all_);
    body += plan_body_->finish();
    auto fields = plan_headers_;
    fields.emplace_back("Content-Length", std::to_string(body.size()));
    head_ = set_head_fields(head_, fields, {"transfer-encoding", sent_expect}) + lf + body;
  } else {
    if (!plan_headers_.empty() || continue_sent_) head_ = set_head_fields(head_, plan_headers_, {sent_expect});
    head_ += lf;
    head_ += raw;
  }
  body_all_ = {};
  body_new_ = {};
  plan_headers_.clear();
  plan_body_.reset();
}

void HttpSession::verdict_forward(const HttpRules& rules) {
  if (state_ != Req::judging && state_ != Req::body_judging) return;
  if (!body_held_) {
    apply_forward_plan();
    decide_or_collect(rules);
    return;
  }
  // The judge held the body: a fault counting attempts fingerprints it as
  // received, before any transformer rewrites it.
  body_hash_ = BodyHash();
  body_hash_.update(body_all_);
  apply_forward_plan();
  decide(rules);
  state_ = Req::decided;
}

void HttpSession::verdict_answer(std::string response, bool close,
                                 std::vector<std::pair<uint64_t, std::string>> after) {
  if (state_ != Req::judging && state_ != Req::body_judging) return;
  reset_body_stage();
  action_ = Action::status;
  delay_ms_ = 0;
  answer_close_ = close || upgrade_ || !header("expect").empty() || !http_should_keep_alive(req_.get());
  answer_ = std::move(response);
  answer_after_.assign(std::make_move_iterator(after.begin()), std::make_move_iterator(after.end()));
  state_ = Req::drain;
}

void HttpSession::tunnel_established() {
  if (state_ != Req::judging) return;
  action_ = Action::status;
  delay_ms_ = 0;
  answer_ = "HTTP/1.1 200 Connection established\r\n\r\n";
  answer_close_ = false;
  connect_ok_ = true;
  state_ = Req::connect_rest;
}

void HttpSession::head_sent() {
  exchange_open_ = true;
  if (state_ == Req::tunnel) tunnel_ = true;
  kick_ = true;
}

void HttpSession::answer_sent() {
  if (!answer_after_.empty()) {
    // A paced answer: the next piece is due after its delay (answer_due
    // sleeps it, then responds), the client side stepped again for it.
    auto [delay, piece] = std::move(answer_after_.front());
    answer_after_.pop_front();
    answer_ = std::move(piece);
    delay_ms_ = delay;
    slept_ = false;
    state_ = Req::answer_due;
    kick_ = true;
    return;
  }
  if (answer_close_ || connect_ok_) {
    state_ = Req::closed;
    return;
  }
  exchange_done();
}

void HttpSession::exchange_done() {
  head_.clear();
  url_.clear();
  headers_.clear();
  in_value_ = head_complete_ = req_complete_ = upgrade_ = false;
  action_ = Action::pass;
  delay_ms_ = 0;
  slept_ = false;
  limit_ = 0;
  answer_.clear();
  answer_after_.clear();
  answer_close_ = false;
  exchange_open_ = resp_complete_ = resp_slept_ = false;
  resp_field_.clear();
  resp_value_.clear();
  resp_in_value_ = sse_ = false;
  cut_at_ = std::string::npos;
  body_seen_ = events_seen_ = 0;
  line_len_ = 0;
  event_has_data_ = false;
  http_parser_pause(req_.get(), 0);
  http_parser_pause(resp_.get(), 0);
  head_method_ = false;
  reset_body_stage();
  state_ = Req::head;
  ++serial_;
  kick_ = true;
}

HttpStep HttpSession::server_step(std::string_view input) {
  if (tunnel_) return input.empty() ? HttpStep{HttpAct::more} : HttpStep{HttpAct::forward, input.size()};
  if (!exchange_open_ || resp_complete_ || state_ == Req::closed) return {HttpAct::wait};
  if (input.empty()) return {HttpAct::more};
  if (action_ == Action::delay_response && !resp_slept_) {
    resp_slept_ = true;
    return {HttpAct::sleep, 0, delay_ms_};
  }
  exec_base_ = input.data();
  cut_at_ = std::string::npos;
  size_t n = http_parser_execute(resp_.get(), &Parse::response_settings(), input.data(), input.size());
  const auto err = HTTP_PARSER_ERRNO(resp_.get());
  if (cut_at_ != std::string::npos) {
    state_ = Req::closed;
    return {HttpAct::cut, std::min(cut_at_, input.size())};
  }
  if (err != HPE_OK && err != HPE_PAUSED) {  // not HTTP the parser can follow: relay as it is from here
    tunnel_ = true;
    kick_ = true;
    return {HttpAct::forward, input.size()};
  }
  if (err == HPE_PAUSED) {  // a message ended
    const unsigned status = resp_->status_code;
    if (resp_->upgrade || (status == 101)) {
      tunnel_ = true;
      kick_ = true;
      // What follows the 101 is the new protocol's.
      return {HttpAct::forward, input.size()};
    }
    http_parser_pause(resp_.get(), 0);
    if (status >= 200) {  // the final response (1xx are interim: 100 Continue, 103)
      resp_complete_ = true;
      kick_ = true;
      if (state_ == Req::done) exchange_done();
    } else {
      sse_ = false;
    }
  }
  return {HttpAct::forward, n};
}

}  // namespace faultline
