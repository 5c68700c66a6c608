// A small HTTP/1.1 server for control APIs (not the data path): one thread, one
// epoll set, many connections, keep-alive and pipelining, the limits of
// HttpRequestParser, listeners on unix sockets and TCP addresses, each with its
// own handler (an HttpRouter, or any function from request to reply).
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/net/http_request.h"
#include "userspace/net/tls_context.h"

namespace faultline {

struct HttpServerLimits {
  HttpRequestParser::Limits request;
  // From the first byte of a request to its last: a slower client gets 408.
  std::chrono::milliseconds request_timeout{10'000};
  // A connection with no request under way and nothing read or written for
  // this long is closed (an idle keep-alive, or a client not reading its reply).
  std::chrono::milliseconds idle_timeout{60'000};
  // Connections beyond this are accepted and closed at once.
  size_t max_connections = 256;
};

// One request answered, for a log line: who, what, which status.
struct HttpExchange {
  const HttpPeer& peer;
  std::string_view method, path;
  int status;
};
using HttpLog = std::function<void(const HttpExchange&)>;

class HttpServer {
 public:
  [[nodiscard]] static Result<HttpServer> create(HttpServerLimits limits = {});
  HttpServer(HttpServer&&) noexcept;
  HttpServer& operator=(HttpServer&&) noexcept;
  ~HttpServer();  // closes every connection and removes the unix sockets it made

  // Listens on a unix socket at path, created with `mode`. A socket file left by
  // a server that is gone is replaced; one that still answers is an error (EADDRINUSE).
  [[nodiscard]] Status listen_unix(const std::string& path, mode_t mode, HttpHandler handler);
  // Listens on "HOST:PORT" (an IPv4 address or a bracketed IPv6 one); port 0
  // takes a free port. Returns the address bound ("127.0.0.1:40111").
  [[nodiscard]] Result<std::string> listen_tcp(const std::string& address, HttpHandler handler);
  // The same over TLS (HTTPS). Writes to a peer that is gone raise SIGPIPE
  // through OpenSSL: a process serving TLS ignores SIGPIPE.
  [[nodiscard]] Result<std::string> listen_tls(const std::string& address, HttpHandler handler,
                                               std::shared_ptr<HttpTlsContext> tls);

  // Listens on an inherited listening socket (a restart's handover), unix or TCP.
  // A unix socket's file becomes this server's, removed when it goes.
  // Returns the address ("127.0.0.1:9469", or the unix path).
  [[nodiscard]] Result<std::string> adopt_listener(UniqueFd fd, HttpHandler handler);
  // The listening sockets, in the order they were added (for a handover).
  [[nodiscard]] std::vector<int> listener_fds() const;
  // Stops listening, leaving the sockets, their listening state and their files
  // to a successor that holds them too. Open connections are kept.
  void release_listeners();

  // Called after every answered request (and every error the server answers itself).
  void set_log(HttpLog log) { log_ = std::move(log); }

  // The answer to a request whose handler returned HttpReply::later(). Call
  // it on the serving thread (from a handler or a timer); nothing happens if
  // that request's connection is gone or it was answered already.
  void complete(uint64_t exchange, const HttpReply& reply);
  // Whether that request still waits for its answer (its client is still there).
  [[nodiscard]] bool waiting(uint64_t exchange) const { return awaiting_.count(exchange) != 0; }
  // Hands the connection of a request still waiting for its answer to the
  // caller, who answers on it in its own time (a stream of output) and closes
  // it; the server forgets it. Plain HTTP only (a TLS session stays here). The
  // bytes received after the request and not parsed come with it. Call it on
  // the serving thread, after the handler returned HttpReply::later().
  struct TakenConnection {
    UniqueFd fd;
    std::string unread;
  };
  [[nodiscard]] Result<TakenConnection> take_connection(uint64_t exchange);
  // Runs `fn` on the serving thread once `delay` has passed (a long poll's end).
  void after(std::chrono::milliseconds delay, std::function<void()> fn);

  // Runs `fn` on the serving thread whenever `fd` is readable (level-triggered:
  // fn must read what woke it). For what other threads or other sockets hand
  // to the serving thread: an eventfd, a database's notification socket.
  [[nodiscard]] Status watch(int fd, std::function<void()> fn);
  void unwatch(int fd);

  // Serves until stop_fd (an eventfd, a signalfd, a pipe) is readable; it is not
  // read. Connections still open are closed on return.
  [[nodiscard]] Status run(int stop_fd);

 private:
  struct Listener;
  struct Connection;
  HttpServer() = default;
  // Watches the listener's fd and keeps it; the last step of listen_unix and listen_tcp.
  [[nodiscard]] Status add_listener(std::unique_ptr<Listener> l);
  void accept_on(Listener& l);
  void on_readable(Connection& c);
  // recv/send, through the connection's TLS session if it has one: -1 with
  // errno EAGAIN when it would block, 0 at the peer's end.
  static ssize_t read_some(Connection& c, char* buf, size_t n);
  static ssize_t write_some(Connection& c, const char* buf, size_t n);
  void on_writable(Connection& c);
  void process(Connection& c);
  void answer(Connection& c, const HttpReply& reply, bool close_after, std::string_view method, std::string_view path);
  void flush(Connection& c);
  // After an error answer that closes a connection whose client may still be
  // sending (a body over the limit, a slow request): stop writing, read and
  // drop what arrives for a while, then close. Closing at once with unread
  // bytes makes the kernel reset the connection, and a client still writing
  // its body then sees the reset instead of the answer.
  void linger(Connection& c);
  void close_connection(int fd);
  void expire_timeouts();
  void run_timers();
  [[nodiscard]] int next_timeout_ms() const;

  HttpServerLimits limits_;
  UniqueFd epoll_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::map<int, std::unique_ptr<Connection>> connections_;
  HttpLog log_;
  uint64_t next_exchange_ = 0;
  std::map<uint64_t, int> awaiting_;  // exchange -> fd of a connection waiting for complete()
  // The connections that have a deadline (every one not waiting for
  // complete()): the timeouts are computed over these alone, so a thousand
  // held long polls cost nothing per turn of the loop.
  std::set<int> timed_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> timers_;
  // TLS connections with decrypted bytes still inside OpenSSL when reading
  // stopped (the input cap): the socket will not signal them, so they are read
  // again after the current round of events.
  std::set<int> tls_pending_;
  std::map<int, std::function<void()>> watched_;
};

}  // namespace faultline
