// The epoll loop: accept, read, parse, answer, write, time out.
#include "userspace/net/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace faultline {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 16 * 1024;
// A client that does not read its replies stops being read once this much waits.
constexpr size_t kMaxPendingOut = 4 * 1024 * 1024;
// A lingering close (HttpServer::linger) waits this long for more bytes after
// the last ones came, and no longer than kLingerMax in all.
constexpr auto kLingerIdle = std::chrono::seconds(2);
constexpr auto kLingerMax = std::chrono::seconds(10);

// "HOST:PORT" -> a socket address; IPv6 in brackets.
Result<sockaddr_storage> parse_tcp_address(const std::string& text, socklen_t& len) {
  sockaddr_storage ss{};
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) return input_error(0, "'" + text + "' is not HOST:PORT");
  std::string host = text.substr(0, colon);
  const std::string port_text = text.substr(colon + 1);
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port_text) > 65535)
    return input_error(0, "'" + text + "': the port is not a number from 0 to 65535");
  const auto port = static_cast<uint16_t>(std::stoul(port_text));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    if (inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6->sin6_addr) != 1)
      return input_error(0, "'" + text + "': not an IPv6 address in brackets");
    len = sizeof(sockaddr_in6);
    return ss;
  }
  auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
  a4->sin_family = AF_INET;
  a4->sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1)
    return input_error(0, "'" + text + "': not an IPv4 address (or [IPv6])");
  len = sizeof(sockaddr_in);
  return ss;
}

std::string address_text(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "unix";
}

std::string serialize(const HttpReply& reply, bool close_after, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " " + http_reason(reply.status) + "\r\n";
  for (const auto& [k, v] : reply.headers) out += k + ": " + v + "\r\n";
  out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
  if (close_after) out += "Connection: close\r\n";
  out += "\r\n";
  if (!head_only) out += reply.body;
  return out;
}

}  // namespace

struct HttpServer::Listener {
  UniqueFd fd;
  bool is_unix = false;
  std::string unix_path;  // removed when the server goes, if still ours
  dev_t dev = 0;
  ino_t ino = 0;
  HttpHandler handler;
  std::shared_ptr<HttpTlsContext> tls;  // null: plain HTTP
};

struct HttpServer::Connection {
  Connection(UniqueFd f, HttpHandler* h, HttpRequestParser::Limits lim) : fd(std::move(f)), handler(h), parser(lim) {}
  UniqueFd fd;
  // The TLS session over fd (freed before fd closes); null for plain HTTP.
  std::unique_ptr<SSL, void (*)(SSL*)> ssl{nullptr, SSL_free};
  bool tls_wants_write = false;  // a read needs the socket writable first (handshake)
  HttpHandler* handler;
  HttpPeer peer;
  HttpRequestParser parser;
  std::string in;  // received, not yet parsed
  std::string out;
  size_t out_pos = 0;
  bool closing = false;          // close once `out` is written
  bool peer_done = false;        // the client sent its last byte (EOF or an error)
  bool linger_on_close = false;  // an error answer: drain the client before closing
  bool lingering = false;        // written out and shut down; reading to drop
  Clock::time_point linger_until{}, linger_cap{};
  uint32_t events = EPOLLIN | EPOLLRDHUP;  // what epoll watches for it now
  Clock::time_point last_activity = Clock::now();
  Clock::time_point request_start{};  // when the request under way began
  // A request whose handler answers later (HttpReply::later()): its exchange,
  // and what its answer needs. Nothing more is read or parsed until then.
  uint64_t awaiting = 0;
  std::string awaiting_method, awaiting_path;
  bool awaiting_close = false;
};

Result<HttpServer> HttpServer::create(HttpServerLimits limits) {
  HttpServer s;
  s.limits_ = limits;
  s.epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  if (!s.epoll_) return errno_error("epoll_create1");
  return s;
}

HttpServer::HttpServer(HttpServer&&) noexcept = default;
HttpServer& HttpServer::operator=(HttpServer&&) noexcept = default;

HttpServer::~HttpServer() {
  connections_.clear();
  for (const auto& l : listeners_) {
    if (!l->is_unix || !l->fd) continue;
    struct stat st {};
    // Only the socket this server made: a newer server may have replaced it.
    if (::stat(l->unix_path.c_str(), &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
      ::unlink(l->unix_path.c_str());
  }
}

Status HttpServer::listen_unix(const std::string& path, mode_t mode, HttpHandler handler) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return input_error(0, "unix socket path '" + path + "' is empty or longer than " +
                              std::to_string(sizeof addr.sun_path - 1) + " bytes");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return errno_error("socket(AF_UNIX)");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return input_error(EEXIST, path + " exists and is not a socket");
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe && ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0)
      return make_error(EADDRINUSE, "another server answers on " + path);
    ::unlink(path.c_str());  // left by a server that is gone
  }
  // The mode is set at bind time by the umask: no moment where the socket is
  // reachable with looser permissions.
  const mode_t old = ::umask(static_cast<mode_t>(~mode & 0777));
  const int rc = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int bind_errno = errno;
  ::umask(old);
  if (rc != 0) return make_error(bind_errno, "bind " + path);
  if (::listen(fd.get(), 64) != 0) return errno_error("listen on " + path);
  auto l = std::make_unique<Listener>();
  if (::stat(path.c_str(), &st) == 0) {
    l->dev = st.st_dev;
    l->ino = st.st_ino;
  }
  l->fd = std::move(fd);
  l->is_unix = true;
  l->unix_path = path;
  l->handler = std::move(handler);
  return add_listener(std::move(l));
}

Status HttpServer::add_listener(std::unique_ptr<Listener> l) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = l->fd.get();
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, l->fd.get(), &ev) != 0) return errno_error("epoll_ctl");
  listeners_.push_back(std::move(l));
  return {};
}

Result<std::string> HttpServer::listen_tls(const std::string& address, HttpHandler handler,
                                           std::shared_ptr<HttpTlsContext> tls) {
  if (!tls) return make_error(EINVAL, "listen_tls without a TLS context");
  auto bound = listen_tcp(address, std::move(handler));
  if (bound) listeners_.back()->tls = std::move(tls);
  return bound;
}

Result<std::string> HttpServer::adopt_listener(UniqueFd fd, HttpHandler handler) {
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &blen) != 0)
    return errno_error("an inherited listener: getsockname");
  int listening = 0;
  socklen_t ol = sizeof listening;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0 || !listening)
    return make_error(EINVAL, "an inherited descriptor is not a listening socket");
  const int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl | O_NONBLOCK) != 0 || ::fcntl(fd.get(), F_SETFD, FD_CLOEXEC) != 0)
    return errno_error("an inherited listener: fcntl");
  std::string where =
      bound.ss_family == AF_UNIX ? reinterpret_cast<sockaddr_un*>(&bound)->sun_path : address_text(bound);
  auto l = std::make_unique<Listener>();
  // A unix socket's file is ours from now on: removed when we go, if still it.
  struct stat st {};
  if (bound.ss_family == AF_UNIX && !where.empty() && ::stat(where.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    l->is_unix = true;
    l->unix_path = where;
    l->dev = st.st_dev;
    l->ino = st.st_ino;
  }
  l->fd = std::move(fd);
  l->handler = std::move(handler);
  FL_TRY(add_listener(std::move(l)));
  return where;
}

std::vector<int> HttpServer::listener_fds() const {
  std::vector<int> out;
  for (const auto& l : listeners_) out.push_back(l->fd.get());
  return out;
}

void HttpServer::release_listeners() {
  for (const auto& l : listeners_) (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, l->fd.get(), nullptr);
  listeners_.clear();  // closes our descriptors; no shutdown(), no unlink()
}

Result<std::string> HttpServer::listen_tcp(const std::string& address, HttpHandler handler) {
  socklen_t len = 0;
  auto ss = parse_tcp_address(address, len);
  if (!ss) return ss.error();
  UniqueFd fd(::socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return errno_error("socket");
  const int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*ss), len) != 0) return errno_error("bind " + address);
  if (::listen(fd.get(), 64) != 0) return errno_error("listen on " + address);
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &blen) != 0) return errno_error("getsockname");
  auto l = std::make_unique<Listener>();
  l->fd = std::move(fd);
  l->handler = std::move(handler);
  FL_TRY(add_listener(std::move(l)));
  return address_text(bound);
}

void HttpServer::accept_on(Listener& l) {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    UniqueFd fd(::accept4(l.fd.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) return;  // EAGAIN, or an error on one connection: the listener stays
    if (connections_.size() >= limits_.max_connections) continue;  // closed at once
    auto c = std::make_unique<Connection>(std::move(fd), &l.handler, limits_.request);
    if (l.is_unix) {
      ucred cred{};
      socklen_t clen = sizeof cred;
      if (::getsockopt(c->fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
        c->peer.has_credentials = true;
        c->peer.pid = cred.pid;
        c->peer.uid = cred.uid;
        c->peer.gid = cred.gid;
      }
      c->peer.address = "unix";
    } else {
      c->peer.address = address_text(ss);
    }
    if (l.tls) {
      // The handshake runs inside the first reads (server side, accept state).
      c->ssl.reset(SSL_new(l.tls->get()));
      if (!c->ssl || SSL_set_fd(c->ssl.get(), c->fd.get()) != 1) continue;
      SSL_set_accept_state(c->ssl.get());
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c->fd.get();
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c->fd.get(), &ev) != 0) continue;
    const int key = c->fd.get();
    connections_.emplace(key, std::move(c));
    timed_.insert(key);
  }
}

void HttpServer::answer(Connection& c, const HttpReply& reply, bool close_after, std::string_view method,
                        std::string_view path) {
  c.out += serialize(reply, close_after, method == "HEAD");
  if (close_after) c.closing = true;
  if (log_) log_(HttpExchange{c.peer, method, path, reply.status});
}

void HttpServer::process(Connection& c) {
  size_t pos = 0;
  while (!c.closing && c.awaiting == 0 && pos < c.in.size() && c.out.size() - c.out_pos < kMaxPendingOut) {
    const bool was_in_request = c.parser.in_request();
    pos += c.parser.feed(std::string_view(c.in).substr(pos));
    if (!was_in_request && c.parser.in_request()) c.request_start = Clock::now();
    // The head is whole and within limits; the client waits to send its body.
    if (c.parser.take_continue_request() && c.parser.state() == HttpRequestParser::State::Reading)
      c.out += "HTTP/1.1 100 Continue\r\n\r\n";
    if (c.parser.state() == HttpRequestParser::State::Failed) {
      answer(c, HttpReply::error(c.parser.error_status(), c.parser.error_detail()), true, "-", "-");
      c.linger_on_close = true;
      break;
    }
    if (c.parser.state() != HttpRequestParser::State::Ready) break;  // needs more bytes
    HttpRequest req = c.parser.take();
    req.peer = c.peer;
    req.exchange = ++next_exchange_;
    HttpReply reply;
    try {
      reply = (*c.handler)(req);
    } catch (const std::exception& e) {
      reply = HttpReply::error(500, std::string("internal error: ") + e.what());
    }
    if (reply.deferred) {
      c.awaiting = req.exchange;
      c.awaiting_method = req.method;
      c.awaiting_path = req.path;
      c.awaiting_close = !req.keep_alive;
      awaiting_[req.exchange] = c.fd.get();
      timed_.erase(c.fd.get());
      break;
    }
    answer(c, reply, !req.keep_alive, req.method, req.path);
  }
  c.in.erase(0, pos);
  if (c.awaiting != 0) return;
  // A client done sending gets the answers to every whole request it sent (a
  // pipeline may wait on replies it has not read yet), then the close.
  if (c.peer_done && !c.closing && c.out.size() - c.out_pos < kMaxPendingOut) c.closing = true;
}

void HttpServer::flush(Connection& c) {
  if (c.lingering) return;  // answered and shut down: only reading is left
  while (c.out_pos < c.out.size()) {
    ssize_t n = write_some(c, c.out.data() + c.out_pos, c.out.size() - c.out_pos);
    if (n > 0) {
      c.out_pos += static_cast<size_t>(n);
      c.last_activity = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    close_connection(c.fd.get());  // the peer is gone
    return;
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
    if (c.closing) {
      if (c.linger_on_close && !c.peer_done) {
        linger(c);
      } else {
        close_connection(c.fd.get());
      }
      return;
    }
  }
  // Level-triggered: watch for input only while it can be used, or a client
  // that sends without reading its replies (or that hung up with replies
  // pending) would wake the loop without end.
  const bool pending = c.out_pos < c.out.size();
  const bool can_read = c.awaiting == 0 && !c.closing && !c.peer_done && c.out.size() - c.out_pos < kMaxPendingOut &&
                        c.in.size() < limits_.request.max_head + limits_.request.max_body + kReadChunk;
  // A connection waiting for a later answer still hears its client hang up.
  const uint32_t want = (can_read ? static_cast<uint32_t>(EPOLLIN | EPOLLRDHUP) : 0u) |
                        (c.awaiting != 0 ? static_cast<uint32_t>(EPOLLRDHUP) : 0u) |
                        (pending || c.tls_wants_write ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  if (can_read && c.ssl && SSL_pending(c.ssl.get()) > 0) tls_pending_.insert(c.fd.get());
  if (want != c.events) {
    epoll_event ev{};
    ev.events = want;
    ev.data.fd = c.fd.get();
    (void)epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
    c.events = want;
  }
}

void HttpServer::linger(Connection& c) {
  if (c.ssl) (void)SSL_shutdown(c.ssl.get());  // close_notify, best effort
  (void)::shutdown(c.fd.get(), SHUT_WR);
  c.lingering = true;
  c.in.clear();
  const auto now = Clock::now();
  c.linger_until = now + kLingerIdle;
  c.linger_cap = now + kLingerMax;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c.fd.get();
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  c.events = ev.events;
}

void HttpServer::on_readable(Connection& c) {
  const int fd = c.fd.get();
  bool eof = false;
  char buf[kReadChunk];
  if (c.lingering) {
    // Dropped unread (a TLS record need not be decrypted to be thrown away).
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        c.linger_until = std::min(Clock::now() + kLingerIdle, c.linger_cap);
        return;
      }
      close_connection(fd);  // the client's end, or an error
      return;
    }
  }
  while (c.in.size() < limits_.request.max_head + limits_.request.max_body + kReadChunk) {
    ssize_t n = read_some(c, buf, sizeof buf);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      c.last_activity = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true;  // closed (0) or failed
    break;
  }
  if (eof) c.peer_done = true;
  if (c.awaiting != 0) {
    // The client of a long poll hung up (or failed): nobody is left to answer.
    if (eof) close_connection(fd);
    return;
  }
  process(c);
  flush(c);
}

ssize_t HttpServer::read_some(Connection& c, char* buf, size_t n) {
  if (!c.ssl) return ::recv(c.fd.get(), buf, n, 0);
  ERR_clear_error();
  const int r = SSL_read(c.ssl.get(), buf, static_cast<int>(std::min<size_t>(n, INT_MAX)));
  if (r > 0) return r;
  switch (SSL_get_error(c.ssl.get(), r)) {
    case SSL_ERROR_WANT_READ:
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_WANT_WRITE:
      c.tls_wants_write = true;
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return 0;  // close_notify
    default:
      errno = EIO;
      return -1;  // a failed handshake, a reset, garbage
  }
}

ssize_t HttpServer::write_some(Connection& c, const char* buf, size_t n) {
  if (!c.ssl) return ::send(c.fd.get(), buf, n, MSG_NOSIGNAL);
  ERR_clear_error();
  const int r = SSL_write(c.ssl.get(), buf, static_cast<int>(std::min<size_t>(n, INT_MAX)));
  if (r > 0) return r;
  switch (SSL_get_error(c.ssl.get(), r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      errno = EAGAIN;
      return -1;
    default:
      errno = EPIPE;
      return -1;
  }
}

void HttpServer::on_writable(Connection& c) {
  const int fd = c.fd.get();
  if (c.tls_wants_write) {
    // The handshake (or a TLS record) waited for the socket to take bytes: read again.
    c.tls_wants_write = false;
    on_readable(c);
    if (connections_.find(fd) == connections_.end()) return;
  }
  flush(c);
  auto it = connections_.find(fd);
  if (it != connections_.end() && (!it->second->in.empty() || it->second->peer_done)) {
    process(*it->second);
    flush(*it->second);
  }
}

void HttpServer::complete(uint64_t exchange, const HttpReply& reply) {
  auto a = awaiting_.find(exchange);
  if (a == awaiting_.end()) return;
  const int fd = a->second;
  awaiting_.erase(a);
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  c.awaiting = 0;
  c.last_activity = Clock::now();
  timed_.insert(fd);
  HttpReply final_reply = reply;
  final_reply.deferred = false;
  answer(c, final_reply, c.awaiting_close, c.awaiting_method, c.awaiting_path);
  process(c);  // requests pipelined behind it
  flush(c);
}

void HttpServer::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  timers_.emplace(Clock::now() + delay, std::move(fn));
}

void HttpServer::run_timers() {
  const auto now = Clock::now();
  // A timer may add timers: take the due ones out first.
  std::vector<std::function<void()>> due;
  while (!timers_.empty() && timers_.begin()->first <= now) {
    due.push_back(std::move(timers_.begin()->second));
    timers_.erase(timers_.begin());
  }
  for (auto& fn : due) fn();
}

Result<HttpServer::TakenConnection> HttpServer::take_connection(uint64_t exchange) {
  auto a = awaiting_.find(exchange);
  if (a == awaiting_.end()) return make_error(ENOENT, "the request is answered or its client is gone");
  auto it = connections_.find(a->second);
  if (it == connections_.end()) return make_error(ENOENT, "the request's connection is gone");
  if (it->second->ssl) return make_error(ENOTSUP, "a TLS connection cannot be handed over");
  if (log_) log_(HttpExchange{it->second->peer, it->second->awaiting_method, it->second->awaiting_path, 200});
  TakenConnection t{std::move(it->second->fd), std::move(it->second->in)};
  awaiting_.erase(a);
  tls_pending_.erase(it->first);
  timed_.erase(it->first);
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, t.fd.get(), nullptr);
  connections_.erase(it);
  return t;
}

void HttpServer::close_connection(int fd) {
  if (auto it = connections_.find(fd); it != connections_.end() && it->second->awaiting != 0)
    awaiting_.erase(it->second->awaiting);
  tls_pending_.erase(fd);
  timed_.erase(fd);
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  connections_.erase(fd);
}

void HttpServer::expire_timeouts() {
  const auto now = Clock::now();
  std::vector<int> idle, slow;
  for (int fd : timed_) {  // a connection waiting for its handler has no deadline
    const auto& c = connections_.at(fd);
    if (c->lingering) {
      if (now >= c->linger_until) idle.push_back(fd);
      continue;
    }
    // A closing connection waits only for its reply to be read: a client that
    // does not read it is dropped after the idle timeout.
    if (c->closing) {
      if (now - c->last_activity >= limits_.idle_timeout) idle.push_back(fd);
      continue;
    }
    if (c->parser.in_request() && now - c->request_start >= limits_.request_timeout)
      slow.push_back(fd);
    else if (!c->parser.in_request() && now - c->last_activity >= limits_.idle_timeout)
      idle.push_back(fd);
  }
  for (int fd : idle) close_connection(fd);
  for (int fd : slow) {
    Connection& c = *connections_.at(fd);
    answer(c,
           HttpReply::error(
               408, "the request was not whole within " + std::to_string(limits_.request_timeout.count()) + " ms"),
           true, "-", "-");
    c.linger_on_close = true;
    flush(c);
  }
}

int HttpServer::next_timeout_ms() const {
  if (!tls_pending_.empty()) return 0;
  auto soonest = timers_.empty() ? Clock::time_point::max() : timers_.begin()->first;
  for (int fd : timed_) {
    const auto& c = connections_.at(fd);
    if (c->lingering) {
      soonest = std::min(soonest, c->linger_until);
      continue;
    }
    if (c->closing) {
      soonest = std::min(soonest, c->last_activity + limits_.idle_timeout);
      continue;
    }
    soonest = std::min(soonest, c->parser.in_request() ? c->request_start + limits_.request_timeout
                                                       : c->last_activity + limits_.idle_timeout);
  }
  if (soonest == Clock::time_point::max()) return -1;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(soonest - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT_MAX));
}

Status HttpServer::watch(int fd, std::function<void()> fn) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return errno_error("epoll_ctl (watch)");
  watched_[fd] = std::move(fn);
  return {};
}

void HttpServer::unwatch(int fd) {
  if (watched_.erase(fd) != 0) (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

Status HttpServer::run(int stop_fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = stop_fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stop_fd, &ev) != 0) return errno_error("epoll_ctl (stop fd)");
  bool stop = false;
  while (!stop) {
    epoll_event events[64];
    int n = epoll_wait(epoll_.get(), events, 64, next_timeout_ms());
    if (n < 0 && errno != EINTR) return errno_error("epoll_wait");
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == stop_fd) {
        stop = true;
        continue;
      }
      if (auto w = watched_.find(fd); w != watched_.end()) {
        auto fn = w->second;  // it may unwatch itself
        fn();
        continue;
      }
      auto l = std::find_if(listeners_.begin(), listeners_.end(), [fd](const auto& x) { return x->fd.get() == fd; });
      if (l != listeners_.end()) {
        accept_on(**l);
        continue;
      }
      auto it = connections_.find(fd);
      if (it == connections_.end()) continue;  // closed earlier in this round
      if (events[i].events & EPOLLOUT) {
        on_writable(*it->second);
        it = connections_.find(fd);
        if (it == connections_.end()) continue;
      }
      if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(*it->second);
    }
    std::set<int> pending;
    pending.swap(tls_pending_);
    for (int fd : pending)
      if (auto it = connections_.find(fd); it != connections_.end()) on_readable(*it->second);
    run_timers();
    expire_timeouts();
  }
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, stop_fd, nullptr);
  for (auto it = connections_.begin(); it != connections_.end();) {
    (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->first, nullptr);
    it = connections_.erase(it);
  }
  timed_.clear();
  return {};
}

}  // namespace faultline
