// The HTTP server layer of the control APIs: the request parser's limits and
// framing, the router's 404/405, and a real HttpServer on loopback (keep-alive,
// pipelining, 408, idle close, many connections on one thread).
#include "userspace/net/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "userspace/net/http_router.h"

namespace {

using faultline::HttpReply;
using faultline::HttpRequest;
using faultline::HttpRequestParser;
using State = HttpRequestParser::State;

HttpRequestParser::Limits small_limits() { return {.max_head = 256, .max_body = 64}; }

TEST(HttpRequestParser, ReadsARequestInPiecesWithLowerCaseHeaders) {
  HttpRequestParser p(small_limits());
  const std::string raw =
      "POST /v1/faults/3/abort?format=text&x=a%20b HTTP/1.1\r\nHost: h\r\nX-Mixed-Case: V\r\n"
      "Content-Length: 4\r\n\r\nbody";
  size_t used = 0;
  for (size_t i = 0; i < raw.size() && p.state() == State::Reading; ++i) used += p.feed(raw.substr(i, 1));
  ASSERT_EQ(p.state(), State::Ready);
  EXPECT_EQ(used, raw.size());
  HttpRequest r = p.take();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/faults/3/abort");
  EXPECT_EQ(r.query, "format=text&x=a%20b");
  EXPECT_EQ(r.query_param("x"), "a b");
  EXPECT_EQ(r.query_param("nope"), std::nullopt);
  EXPECT_EQ(r.header("x-mixed-case"), "V");
  EXPECT_EQ(r.body, "body");
  EXPECT_TRUE(r.keep_alive);
}

TEST(HttpRequestParser, StopsAfterEachRequestOfAPipeline) {
  HttpRequestParser p(small_limits());
  const std::string raw = "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.0\r\n\r\n";
  size_t used = p.feed(raw);
  ASSERT_EQ(p.state(), State::Ready);
  EXPECT_EQ(p.take().path, "/a");
  used += p.feed(std::string_view(raw).substr(used));
  ASSERT_EQ(p.state(), State::Ready);
  HttpRequest b = p.take();
  EXPECT_EQ(b.path, "/b");
  EXPECT_FALSE(b.keep_alive) << "HTTP/1.0 without keep-alive closes";
  EXPECT_EQ(used, raw.size());
}

TEST(HttpRequestParser, DeChunksABody) {
  HttpRequestParser p(small_limits());
  (void)p.feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  ASSERT_EQ(p.state(), State::Ready);
  EXPECT_EQ(p.take().body, "abcde");
}

int error_for(const std::string& raw) {
  HttpRequestParser p(small_limits());
  (void)p.feed(raw);
  return p.state() == State::Failed ? p.error_status() : 0;
}

TEST(HttpRequestParser, RefusesWithTheRightStatus) {
  EXPECT_EQ(error_for("GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n"), 431);
  EXPECT_EQ(error_for("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n"), 414);
  EXPECT_EQ(error_for("POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n"), 413) << "judged before the body comes";
  EXPECT_EQ(error_for("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n" + std::string(65, 'x')), 413);
  EXPECT_EQ(error_for("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n"), 400);
  EXPECT_EQ(error_for("GET / HTTP/1.1\r\nContent Length: 5\r\n\r\n"), 400);
  EXPECT_EQ(error_for("GET /a\tb HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(error_for("GET /\xff HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(error_for("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(error_for("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(error_for("GET * HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(error_for("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(error_for("\x01\x02\x03 junk\r\n\r\n"), 400);
}

TEST(HttpRouter, MatchesParamsAndSays404Or405) {
  faultline::HttpRouter r;
  r.add("POST", "/v1/faults/{id}/abort",
        [](const HttpRequest&, const faultline::PathParams& p) { return HttpReply::text(200, p.at("id")); });
  r.add("GET", "/v1/status",
        [](const HttpRequest&, const faultline::PathParams&) { return HttpReply::text(200, "s"); });
  HttpRequest req;
  req.method = "POST";
  req.path = "/v1/faults/r%37/abort";
  EXPECT_EQ(r.route(req).body, "r7");
  req.method = "GET";
  HttpReply wrong = r.route(req);
  EXPECT_EQ(wrong.status, 405);
  ASSERT_FALSE(wrong.headers.empty());
  EXPECT_EQ(wrong.headers.back(), (std::pair<std::string, std::string>{"Allow", "POST"}));
  req.path = "/v1/faults/abort";
  EXPECT_EQ(r.route(req).status, 404);
  req.path = "/v1/status";
  req.method = "HEAD";
  EXPECT_EQ(r.route(req).status, 200) << "a GET route answers HEAD";
}

// A server on 127.0.0.1 served by a thread until the test ends.
class LoopbackServer {
 public:
  explicit LoopbackServer(faultline::HttpServerLimits limits) {
    auto s = faultline::HttpServer::create(limits);
    if (!s) throw std::runtime_error(s.error().describe());
    server_.emplace(std::move(*s));
    router_.add("GET", "/hello", [](const HttpRequest& r, const faultline::PathParams&) {
      return HttpReply::text(200, "hello " + r.query);
    });
    router_.add("GET", "/big", [](const HttpRequest&, const faultline::PathParams&) {
      return HttpReply::text(200, std::string(1 << 20, 'x'));
    });
    // A long poll: answered by a timer of the serving thread 300 ms later.
    router_.add("GET", "/later", [this](const HttpRequest& r, const faultline::PathParams&) {
      const uint64_t exchange = r.exchange;
      server_->after(std::chrono::milliseconds(300), [this, exchange] {
        server_->complete(exchange, HttpReply::text(200, "later " + std::to_string(exchange)));
      });
      return HttpReply::later();
    });
    auto addr = server_->listen_tcp("127.0.0.1:0", router_.handler());
    if (!addr) throw std::runtime_error(addr.error().describe());
    port_ = static_cast<uint16_t>(std::stoul(addr->substr(addr->rfind(':') + 1)));
    stop_ = ::eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] {
      tid_ = ::gettid();
      (void)server_->run(stop_);
    });
    while (tid_ == 0) std::this_thread::yield();
  }
  ~LoopbackServer() {
    uint64_t one = 1;
    (void)!::write(stop_, &one, sizeof one);
    thread_.join();
    ::close(stop_);
  }
  // rcvbuf: a small receive buffer, for a client whose replies back up.
  [[nodiscard]] int connect(int rcvbuf = 0) const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0) (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

 private:
  std::optional<faultline::HttpServer> server_;
  faultline::HttpRouter router_;
  uint16_t port_ = 0;
  int stop_ = -1;
  std::thread thread_;

 public:
  std::atomic<pid_t> tid_{0};  // the serving thread, for its CPU time
};

// CPU time (user + system) of one thread of ours, in clock ticks.
long thread_cpu_ticks(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

// Reads until the peer closes or `want` bytes of replies ("HTTP/1.1" count) came, or 3 s.
std::string read_replies(int fd, size_t want_replies, int timeout_ms = 3000) {
  std::string out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    size_t n = 0;
    for (size_t at = out.find("HTTP/1.1 "); at != std::string::npos; at = out.find("HTTP/1.1 ", at + 1)) ++n;
    if (want_replies && n >= want_replies && out.find("\r\n\r\n", out.rfind("HTTP/1.1 ")) != std::string::npos) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t got = ::recv(fd, buf, sizeof buf, 0);
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

void send_all(int fd, const std::string& s) {
  ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), (ssize_t)s.size());
}

TEST(HttpServer, KeepsConnectionsAliveAndAnswersPipelinesInOrder) {
  LoopbackServer srv({});
  int fd = srv.connect();
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /hello?1 HTTP/1.1\r\nHost: x\r\n\r\nGET /hello?2 HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string out = read_replies(fd, 2);
  EXPECT_LT(out.find("hello 1"), out.find("hello 2")) << out;
  send_all(fd, "GET /hello?3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  out = read_replies(fd, 0);
  EXPECT_NE(out.find("hello 3"), std::string::npos) << out;
  EXPECT_NE(out.find("Connection: close"), std::string::npos) << out;
  ::close(fd);
}

// A body over the limit is refused with 413 as soon as the head says so, while
// the client is still writing it. The server drains the rest before closing: a
// close with unread bytes would reset the connection, the client's writes would
// fail and the 413 could be lost with them (undici's "fetch failed").
TEST(HttpServer, AClientStillSendingABodyOverTheLimitReads413NotAReset) {
  faultline::HttpServerLimits limits;
  limits.request.max_body = 64 * 1024;
  LoopbackServer srv(limits);
  int fd = srv.connect();
  ASSERT_GE(fd, 0);
  const size_t body = 16 * 1024 * 1024;
  std::atomic<bool> sent_all{false};
  std::atomic<int> send_errno{0};
  std::thread writer([&] {
    const std::string head = "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body) + "\r\n\r\n";
    if (::send(fd, head.data(), head.size(), MSG_NOSIGNAL) != (ssize_t)head.size()) {
      send_errno = errno;
      return;
    }
    const std::string chunk(256 * 1024, 'b');
    for (size_t left = body; left > 0;) {
      const ssize_t n = ::send(fd, chunk.data(), std::min(left, chunk.size()), MSG_NOSIGNAL);
      if (n <= 0) {
        send_errno = errno;
        return;
      }
      left -= static_cast<size_t>(n);
    }
    sent_all = true;
  });
  writer.join();  // the server drains what it will not use, so the writes all complete
  EXPECT_TRUE(sent_all) << "a write failed: " << std::strerror(send_errno.load());
  const std::string out = read_replies(fd, 0, 5000);
  EXPECT_EQ(out.rfind("HTTP/1.1 413 ", 0), 0u) << out;
  EXPECT_NE(out.find("Connection: close"), std::string::npos) << out;
  ::close(fd);
}

TEST(HttpServer, ASlowRequestGets408AndAnIdleConnectionIsClosed) {
  faultline::HttpServerLimits limits;
  limits.request_timeout = std::chrono::milliseconds(300);
  limits.idle_timeout = std::chrono::milliseconds(300);
  LoopbackServer srv(limits);
  int slow = srv.connect();
  int idle = srv.connect();
  ASSERT_GE(slow, 0);
  ASSERT_GE(idle, 0);
  send_all(slow, "GET /hello HTTP/1.1\r\nHost: x\r\n");  // the head never ends
  const std::string out = read_replies(slow, 0, 3000);
  EXPECT_EQ(out.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << out;
  EXPECT_EQ(read_replies(idle, 0, 3000), "") << "closed without a word";
  ::close(slow);
  ::close(idle);
}

// A client that pipelines requests, half-closes and does not read the replies:
// no busy loop while they wait (a level-triggered EOF would wake the loop
// forever), and it is dropped once nothing has moved for the idle timeout.
TEST(HttpServer, AClientThatDoesNotReadIsNotSpunOnAndIsDropped) {
  faultline::HttpServerLimits limits;
  limits.idle_timeout = std::chrono::milliseconds(1500);
  LoopbackServer srv(limits);
  int fd = srv.connect(4096);
  ASSERT_GE(fd, 0);
  // Four 1 MiB replies: more than the socket buffers take, less than the 4 MiB
  // after which the server stops reading a client anyway.
  std::string many;
  for (int i = 0; i < 4; ++i) many += "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
  send_all(fd, many);
  ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const long before = thread_cpu_ticks(srv.tid_);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const long spent = thread_cpu_ticks(srv.tid_) - before;
  EXPECT_LE(spent, 10) << "the server thread used " << spent << " ticks of CPU in 1 s while waiting on the client";
  // Dropped: reading now ends (the kernel's buffered bytes, then EOF or a reset).
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  std::string got = read_replies(fd, 0, 5000);
  EXPECT_LT(got.size(), 4u << 20) << "every reply arrived: the connection was not dropped";
  ::close(fd);
}

// Pipelined requests, then the client's half-close: every one is answered
// before the server closes, even those that waited on unread replies.
TEST(HttpServer, AHalfClosedClientGetsEveryAnswer) {
  LoopbackServer srv({});
  int fd = srv.connect();
  ASSERT_GE(fd, 0);
  std::string many;
  for (int i = 0; i < 8; ++i) many += "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
  send_all(fd, many);
  ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string got = read_replies(fd, 0, 10000);
  size_t n = 0;
  for (size_t at = got.find("HTTP/1.1 200"); at != std::string::npos; at = got.find("HTTP/1.1 200", at + 1)) ++n;
  EXPECT_EQ(n, 8u);
  ::close(fd);
}

// Expect: 100-continue: the server says 100 once the head is accepted, and
// answers the request once the body came; a body too large is refused at once.
TEST(HttpServer, AnswersExpect100ContinueBeforeTheBody) {
  LoopbackServer srv({});
  int fd = srv.connect();
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /hello?c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  std::string interim = read_replies(fd, 1);
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  send_all(fd, "body");
  std::string out = read_replies(fd, 1);
  EXPECT_NE(out.find("hello c"), std::string::npos) << out;
  ::close(fd);
  fd = srv.connect();
  send_all(fd, "POST /hello HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 99999999\r\n\r\n");
  out = read_replies(fd, 0);
  EXPECT_EQ(out.rfind("HTTP/1.1 413 ", 0), 0u) << out;
  ::close(fd);
}

// A reply given later (a long poll) holds its connection's pipeline, not the
// server: another connection is answered meanwhile; a client that hangs up
// while it waits is closed without the server spinning.
TEST(HttpServer, AnswersALaterReplyInOrderWhileServingOthers) {
  LoopbackServer srv({});
  int waiting = srv.connect();
  int other = srv.connect();
  ASSERT_GE(waiting, 0);
  ASSERT_GE(other, 0);
  const auto start = std::chrono::steady_clock::now();
  send_all(waiting, "GET /later HTTP/1.1\r\n\r\nGET /hello?after HTTP/1.1\r\n\r\n");
  send_all(other, "GET /hello?now HTTP/1.1\r\n\r\n");
  EXPECT_NE(read_replies(other, 1).find("hello now"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250)) << "the other client waited";
  const std::string out = read_replies(waiting, 2);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  EXPECT_NE(out.find("later "), std::string::npos) << out;
  EXPECT_LT(out.find("later "), out.find("hello after")) << out;
  // Hung up while waiting: the timer finds nobody, and nothing spins.
  int gone = srv.connect();
  send_all(gone, "GET /later HTTP/1.1\r\n\r\n");
  ::close(gone);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const long before = thread_cpu_ticks(srv.tid_);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_LE(thread_cpu_ticks(srv.tid_) - before, 10);
  ::close(waiting);
  ::close(other);
}

// A held request (a long poll) has no deadline while its handler works, longer
// than the idle timeout here; once answered, its kept-alive connection has one
// again and is closed when it idles.
TEST(HttpServer, AHeldRequestWaitsPastTheIdleTimeoutAndItsConnectionIdlesOutAfter) {
  faultline::HttpServerLimits limits;
  limits.request_timeout = std::chrono::milliseconds(150);
  limits.idle_timeout = std::chrono::milliseconds(150);
  LoopbackServer srv(limits);
  int fd = srv.connect();
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string out = read_replies(fd, 1);
  EXPECT_NE(out.find("later "), std::string::npos) << "the held request was dropped: " << out;
  const auto answered = std::chrono::steady_clock::now();
  EXPECT_EQ(read_replies(fd, 0, 5000), "") << "closed without a word";
  EXPECT_LT(std::chrono::steady_clock::now() - answered, std::chrono::milliseconds(4000))
      << "the answered connection was never closed for idling";
  ::close(fd);
}

TEST(HttpServer, ServesManyConnectionsAtOnceOnOneThread) {
  LoopbackServer srv({});
  std::vector<int> fds;
  for (int i = 0; i < 50; ++i) {
    fds.push_back(srv.connect());
    ASSERT_GE(fds.back(), 0);
  }
  for (size_t i = 0; i < fds.size(); ++i) send_all(fds[i], "GET /hello?" + std::to_string(i) + " HTTP/1.1\r\n\r\n");
  for (size_t i = 0; i < fds.size(); ++i) {
    EXPECT_NE(read_replies(fds[i], 1).find("hello " + std::to_string(i)), std::string::npos);
    ::close(fds[i]);
  }
}

}  // namespace

namespace {

TEST(HttpRequestParser, KeepsAnEmptyHeaderValueApartFromTheNextName) {
  HttpRequestParser p(small_limits());
  (void)p.feed("GET / HTTP/1.1\r\nA:\r\nB: 1\r\nC: \r\n\r\n");
  ASSERT_EQ(p.state(), State::Ready);
  HttpRequest r = p.take();
  ASSERT_EQ(r.headers.size(), 3u);
  EXPECT_EQ(r.header("a"), "");
  EXPECT_EQ(r.header("b"), "1");
  EXPECT_EQ(r.header("c"), "");
}

}  // namespace
