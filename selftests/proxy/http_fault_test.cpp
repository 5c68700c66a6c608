// The proxy's HTTP mode with real traffic on loopback: a small HTTP/1.1
// upstream in the test (keep-alive, content-length, chunked, SSE, HEAD, 204,
// 100-continue, Upgrade) behind a proxy with HTTP faults; raw sockets as the
// client, so pipelining and half-sent heads are ours to make. Each fault is
// checked on the wire: the status and bytes the client got, and whether the
// request reached the upstream.
#include "userspace/proxy/http_fault.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "selftests/lib/clock.h"
#include "selftests/proxy/proxy_fixture.h"

namespace {

using fltest::UniqueFd;

// --- reading HTTP off a blocking socket (the test's side, not the proxy's) ---

// Bytes read from a socket, consumed from the front.
class WireReader {
 public:
  explicit WireReader(int fd) : fd_(fd) {}
  // Until `delim` (included); false on EOF/error first.
  bool read_until(const std::string& delim, std::string& out) {
    for (;;) {
      size_t at = buf_.find(delim);
      if (at != std::string::npos) {
        out = buf_.substr(0, at + delim.size());
        buf_.erase(0, at + delim.size());
        return true;
      }
      if (!fill()) return false;
    }
  }
  bool read_n(size_t n, std::string& out) {
    while (buf_.size() < n)
      if (!fill()) return false;
    out = buf_.substr(0, n);
    buf_.erase(0, n);
    return true;
  }
  // Whatever comes until EOF or error; the errno that ended it (0: EOF).
  int read_rest(std::string& out) {
    out = buf_;
    buf_.clear();
    char b[16384];
    for (;;) {
      ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n == 0) return 0;
      if (n < 0) return errno;
      out.append(b, size_t(n));
    }
  }
  int fd() const { return fd_; }

 private:
  bool fill() {
    char b[16384];
    ssize_t n = ::recv(fd_, b, sizeof b, 0);
    if (n <= 0) {
      err_ = n == 0 ? 0 : errno;
      return false;
    }
    buf_.append(b, size_t(n));
    return true;
  }
  int fd_;
  std::string buf_;
  int err_ = 0;
};

struct Message {
  bool complete = false;
  std::string start;  // request line or status line
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower case
  std::string body;
  std::string header(const std::string& name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
};

std::string lowered(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// One message: the head, then a body by Content-Length or chunked (none for
// `no_body`: HEAD, 1xx, 204, 304).
Message read_message(WireReader& r, bool is_response, bool no_body = false) {
  Message m;
  std::string head;
  if (!r.read_until("\r\n\r\n", head)) return m;
  size_t eol = head.find("\r\n");
  m.start = head.substr(0, eol);
  if (is_response && m.start.size() >= 12) m.status = std::atoi(m.start.c_str() + 9);
  size_t pos = eol + 2;
  while (pos < head.size() - 2) {
    size_t end = head.find("\r\n", pos);
    std::string line = head.substr(pos, end - pos);
    size_t colon = line.find(':');
    std::string v = line.substr(colon + 1);
    while (!v.empty() && v[0] == ' ') v.erase(0, 1);
    m.headers.emplace_back(lowered(line.substr(0, colon)), v);
    pos = end + 2;
  }
  if (no_body || (is_response && (m.status / 100 == 1 || m.status == 204 || m.status == 304))) {
    m.complete = true;
    return m;
  }
  if (lowered(m.header("transfer-encoding")) == "chunked") {
    for (;;) {
      std::string line;
      if (!r.read_until("\r\n", line)) return m;
      size_t size = std::stoul(line, nullptr, 16);
      std::string data;
      if (!r.read_n(size + 2, data)) return m;
      if (size == 0) break;
      m.body += data.substr(0, size);
    }
  } else if (!m.header("content-length").empty()) {
    if (!r.read_n(std::stoul(m.header("content-length")), m.body)) return m;
  } else if (is_response) {
    if (r.read_rest(m.body) != 0) return m;
  }
  m.complete = true;
  return m;
}

// --- the upstream -----------------------------------------------------------

// The upstream's writes: a client the proxy cut off is no test failure.
bool send_quiet(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

// A keep-alive HTTP/1.1 server: each connection reads requests in order and
// answers by path. Counts the requests it saw, so a faulted request that must
// not reach it can be told from one that did.
class Upstream {
 public:
  Upstream() : server_([this](UniqueFd fd) { serve(std::move(fd)); }) {}
  [[nodiscard]] uint16_t port() const { return server_.port(); }
  [[nodiscard]] int requests() const { return requests_.load(); }
  [[nodiscard]] int connections() const { return server_.accepted(); }

 private:
  void serve(UniqueFd fd) {
    WireReader r(fd.get());
    for (;;) {
      Message req;
      // Requests are read here with the same reader: Expect and Upgrade need a look first.
      if (!peek_request(r, req)) return;
      ++requests_;
      const std::string path =
          req.start.substr(req.start.find(' ') + 1, req.start.rfind(' ') - req.start.find(' ') - 1);
      const bool head_method = req.start.rfind("HEAD ", 0) == 0;
      std::string out;
      if (path == "/upgrade" && !req.header("upgrade").empty()) {
        send_quiet(fd.get(), "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n");
        char b[4096];
        for (;;) {  // the new protocol: an echo
          ssize_t n = ::recv(fd.get(), b, sizeof b, 0);
          if (n <= 0 || !send_quiet(fd.get(), std::string(b, size_t(n)))) return;
        }
      } else if (path == "/chunked") {
        out =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
            "5\r\nhello\r\n6\r\n world\r\n1\r\n!\r\n0\r\n\r\n";
      } else if (path == "/sse") {
        send_quiet(fd.get(),
                   "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (int i = 1; i <= 5; ++i) {
          std::string ev = "event: n\ndata: {\"i\":" + std::to_string(i) + "}\n\n";
          char size[16];
          std::snprintf(size, sizeof size, "%zx\r\n", ev.size());
          if (!send_quiet(fd.get(), size + ev + "\r\n")) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        out = "0\r\n\r\n";
      } else if (path == "/big") {
        out = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + fltest::pattern(100000, 3);
      } else if (path == "/nocontent") {
        out = "HTTP/1.1 204 No Content\r\n\r\n";
      } else if (path == "/notmodified") {
        out = "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 9\r\n\r\n";
      } else if (path == "/echo") {
        out = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(req.body.size()) + "\r\n\r\n" + req.body;
      } else {
        const std::string body = "hello " + path + "\n";
        out = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
              "\r\n\r\n" + (head_method ? "" : body);
      }
      if (!send_quiet(fd.get(), out)) return;
    }
  }

  // The request head, a 100 Continue when asked for, then the body.
  bool peek_request(WireReader& r, Message& m) {
    std::string head;
    if (!r.read_until("\r\n\r\n", head)) return false;
    size_t eol = head.find("\r\n");
    m.start = head.substr(0, eol);
    size_t pos = eol + 2;
    while (pos < head.size() - 2) {
      size_t end = head.find("\r\n", pos);
      std::string line = head.substr(pos, end - pos);
      size_t colon = line.find(':');
      std::string v = line.substr(colon + 1);
      while (!v.empty() && v[0] == ' ') v.erase(0, 1);
      m.headers.emplace_back(lowered(line.substr(0, colon)), v);
      pos = end + 2;
    }
    if (lowered(m.header("expect")) == "100-continue") send_quiet(r.fd(), "HTTP/1.1 100 Continue\r\n\r\n");
    if (lowered(m.header("transfer-encoding")) == "chunked") {
      for (;;) {
        std::string line;
        if (!r.read_until("\r\n", line)) return false;
        size_t size = std::stoul(line, nullptr, 16);
        std::string data;
        if (!r.read_n(size + 2, data)) return false;
        if (size == 0) break;
        m.body += data.substr(0, size);
      }
    } else if (!m.header("content-length").empty()) {
      if (!r.read_n(std::stoul(m.header("content-length")), m.body)) return false;
    }
    return true;
  }
  std::atomic<int> requests_{0};
  fltest::ScriptServer server_;
};

// --- the fixture -------------------------------------------------------------

class HttpFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proxy_ = fltest::start_proxy(upstream_.port());
    ASSERT_TRUE(proxy_.registry);
  }

  void add(const std::string& json_text) {
    auto f = faultline::http_fault_from_json(nlohmann::json::parse(json_text));
    ASSERT_TRUE(f.ok()) << json_text << ": " << (f.ok() ? "" : f.error().describe());
    auto added = proxy_.registry->add_http_fault("p", *f);
    ASSERT_TRUE(added.ok()) << added.error().describe();
  }

  uint64_t hits(const std::string& name) {
    auto s = proxy_.registry->stats("p");
    for (const auto& f : s->http_faults)
      if (f.toxic == name) return f.connections;
    return 0;
  }

  UniqueFd connect() { return fltest::connect_loopback(proxy_.port, 10000); }

  Upstream upstream_;
  fltest::ProxyUnderTest proxy_;
};

std::string get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: upstream.test\r\n" + extra + "\r\n";
}

TEST_F(HttpFaultTest, CleanRequestsPassByteExactOnOneKeepAliveConnection) {
  add(R"({"type":"status","match":{"path":"/never"},"attributes":{"status":503}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  for (const char* path : {"/a", "/chunked", "/big", "/echo"}) {
    std::string req =
        std::string(path) == "/echo" ? "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde" : get(path);
    fltest::send_all(c.get(), req);
    Message m = read_message(r, true);
    ASSERT_TRUE(m.complete) << path;
    EXPECT_EQ(m.status, 200) << path;
    if (std::string(path) == "/chunked") EXPECT_EQ(m.body, "hello world!");
    if (std::string(path) == "/big") EXPECT_TRUE(m.body == fltest::pattern(100000, 3)) << "the 100 kB body changed";
    if (std::string(path) == "/echo") EXPECT_EQ(m.body, "abcde");
  }
  EXPECT_EQ(upstream_.requests(), 4);
  EXPECT_EQ(upstream_.connections(), 1) << "one client connection, one upstream connection";
}

TEST_F(HttpFaultTest, StatusFaultAnswersInsteadOfTheUpstreamAndKeepsTheConnection) {
  add(R"({"name":"pay","type":"status","match":{"method":"POST","path":"/payments"},
          "attributes":{"status":503,"body":"{\"down\":true}","content_type":"application/json",
                        "headers":{"Retry-After":"7"}}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  // Faulted, clean, faulted (with a chunked body to drain), clean: one connection.
  fltest::send_all(c.get(), "POST /payments/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  Message m1 = read_message(r, true);
  ASSERT_TRUE(m1.complete);
  EXPECT_EQ(m1.status, 503);
  EXPECT_EQ(m1.body, "{\"down\":true}");
  EXPECT_EQ(m1.header("content-type"), "application/json");
  EXPECT_EQ(m1.header("retry-after"), "7");
  fltest::send_all(c.get(), get("/payments/1"));  // GET: not matched
  Message m2 = read_message(r, true);
  EXPECT_EQ(m2.status, 200);
  fltest::send_all(c.get(), "POST /paymentsX HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(read_message(r, true).status, 200) << "a prefix is whole segments";
  fltest::send_all(c.get(),
                   "POST /payments/2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  Message m3 = read_message(r, true);
  EXPECT_EQ(m3.status, 503);
  fltest::send_all(c.get(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok");
  Message m4 = read_message(r, true);
  EXPECT_EQ(m4.status, 200);
  EXPECT_EQ(m4.body, "ok");
  EXPECT_EQ(upstream_.requests(), 3) << "the faulted requests must not reach the upstream";
  EXPECT_EQ(hits("pay"), 2u);
}

TEST_F(HttpFaultTest, PipelinedRequestsAreAnsweredInOrderFaultedOrNot) {
  add(R"({"type":"status","match":{"path":"/b"},"attributes":{"status":418,"body":"teapot"}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  fltest::send_all(c.get(), get("/a") + get("/b") + get("/chunked") + get("/b") + get("/c"));
  std::vector<int> statuses;
  std::vector<std::string> bodies;
  for (int i = 0; i < 5; ++i) {
    Message m = read_message(r, true);
    ASSERT_TRUE(m.complete) << "response " << i;
    statuses.push_back(m.status);
    bodies.push_back(m.body);
  }
  EXPECT_EQ(statuses, (std::vector<int>{200, 418, 200, 418, 200}));
  EXPECT_EQ(bodies[0], "hello /a\n");
  EXPECT_EQ(bodies[2], "hello world!");
  EXPECT_EQ(bodies[4], "hello /c\n");
  EXPECT_EQ(upstream_.requests(), 3);
}

TEST_F(HttpFaultTest, PercentFaultsAShareOfRequests) {
  add(R"({"name":"half","type":"status","percent":50,"attributes":{"status":500}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  int faulted = 0;
  for (int i = 0; i < 200; ++i) {
    fltest::send_all(c.get(), get("/x"));
    Message m = read_message(r, true);
    ASSERT_TRUE(m.complete);
    faulted += m.status == 500;
  }
  EXPECT_GT(faulted, 60);
  EXPECT_LT(faulted, 140);
  EXPECT_EQ(hits("half"), uint64_t(faulted));
  EXPECT_EQ(upstream_.requests(), 200 - faulted);
}

TEST_F(HttpFaultTest, MatchOnHostGlobAndHeaders) {
  add(R"({"name":"m","type":"status","match":{"host":"api.example.com","path":"/v1/*/items",
          "headers":[{"name":"X-Tenant","equals":"blue"},{"name":"user-agent","contains":"bot"}]},
          "attributes":{"status":429}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  auto status = [&](const std::string& host, const std::string& path, const std::string& headers) {
    fltest::send_all(c.get(), "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + headers + "\r\n");
    return read_message(r, true).status;
  };
  const std::string good = "X-Tenant: blue\r\nUser-Agent: a-bot/1\r\n";
  EXPECT_EQ(status("api.example.com:8443", "/v1/x/items?q=1", good), 429);
  EXPECT_EQ(status("API.example.com", "/v1/a/b/items", good), 429) << "glob * crosses /";
  EXPECT_EQ(status("other.example.com", "/v1/x/items", good), 200);
  EXPECT_EQ(status("api.example.com", "/v2/x/items", good), 200);
  EXPECT_EQ(status("api.example.com", "/v1/x/itemsX", good), 200) << "a glob matches the whole path";
  EXPECT_EQ(status("api.example.com", "/v1/x/items", "X-Tenant: red\r\nUser-Agent: a-bot/1\r\n"), 200);
  EXPECT_EQ(status("api.example.com", "/v1/x/items", "X-Tenant: blue\r\nUser-Agent: curl\r\n"), 200);
}

TEST_F(HttpFaultTest, DelayBeforeTheRequestAndBeforeTheResponse) {
  add(R"({"name":"req","type":"delay","match":{"path":"/slow-req"},"attributes":{"delay":200}})");
  add(R"({"name":"resp","type":"delay","match":{"path":"/slow-resp"},"attributes":{"delay":200,"where":"response"}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  for (const char* path : {"/slow-req", "/slow-resp", "/fast"}) {
    uint64_t t0 = fltest::monotonic_ns();
    fltest::send_all(c.get(), get(path));
    Message m = read_message(r, true);
    double ms = double(fltest::monotonic_ns() - t0) / 1e6;
    ASSERT_EQ(m.status, 200) << path;
    EXPECT_EQ(m.body, std::string("hello ") + path + "\n");
    if (std::string(path) == "/fast")
      EXPECT_LT(ms, 150) << path << ": no delay (the bound leaves room for a loaded machine)";
    else
      EXPECT_GE(ms, 195) << path;
  }
  EXPECT_EQ(upstream_.requests(), 3);
}

TEST_F(HttpFaultTest, ResetSendsAnRstMidRequest) {
  add(R"({"type":"reset","match":{"path":"/boom"}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  fltest::send_all(c.get(), get("/ok"));
  EXPECT_EQ(read_message(r, true).status, 200);
  fltest::send_all(c.get(), "POST /boom HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial");
  std::string rest;
  EXPECT_EQ(r.read_rest(rest), ECONNRESET) << "got " << rest.size() << " bytes and a clean end instead";
  EXPECT_EQ(upstream_.requests(), 1);
}

TEST_F(HttpFaultTest, TruncateCutsTheBodyAfterNBytesAndCloses) {
  add(R"({"type":"truncate","match":{"path":"/big"},"attributes":{"bytes":1000}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  fltest::send_all(c.get(), get("/big"));
  std::string head;
  ASSERT_TRUE(r.read_until("\r\n\r\n", head));
  EXPECT_NE(head.find("Content-Length: 100000"), std::string::npos);
  std::string body;
  EXPECT_EQ(r.read_rest(body), 0) << "a FIN after the cut";
  EXPECT_EQ(body.size(), 1000u);
  EXPECT_TRUE(body == fltest::pattern(100000, 3).substr(0, 1000));
}

TEST_F(HttpFaultTest, AbortStreamCutsAnSseStreamAfterNEvents) {
  add(R"({"type":"abort_stream","attributes":{"events":2}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  fltest::send_all(c.get(), get("/sse"));
  std::string head;
  ASSERT_TRUE(r.read_until("\r\n\r\n", head));
  std::string rest;
  EXPECT_EQ(r.read_rest(rest), 0);
  // Chunked framing around two whole events, then the end: no third event, no last chunk.
  EXPECT_NE(rest.find("data: {\"i\":2}\n\n"), std::string::npos) << rest;
  EXPECT_EQ(rest.find("\"i\":3"), std::string::npos) << rest;
  EXPECT_EQ(rest.find("0\r\n\r\n"), std::string::npos) << "the stream must end without its last chunk";
  EXPECT_TRUE(rest.size() >= 2 && rest.substr(rest.size() - 2) == "\n\n") << "cut right after the event";
}

TEST_F(HttpFaultTest, HeadNoContentContinueAndUpgradePassThrough) {
  add(R"({"type":"status","match":{"path":"/never"},"attributes":{"status":503}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  fltest::send_all(c.get(), "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n");
  Message h = read_message(r, true, true);
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.header("content-length"), "9");
  fltest::send_all(c.get(), get("/nocontent"));
  EXPECT_EQ(read_message(r, true).status, 204);
  fltest::send_all(c.get(), get("/notmodified", "If-None-Match: \"v1\"\r\n"));
  EXPECT_EQ(read_message(r, true).status, 304) << "a 304's Content-Length announces no body";
  // Expect: 100-continue: the interim response comes through, then the body goes.
  fltest::send_all(c.get(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  Message cont = read_message(r, true);
  EXPECT_EQ(cont.status, 100);
  fltest::send_all(c.get(), "body");
  Message echoed = read_message(r, true);
  EXPECT_EQ(echoed.status, 200);
  EXPECT_EQ(echoed.body, "body");
  // Upgrade: 101, then raw bytes both ways.
  fltest::send_all(c.get(), "GET /upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n");
  EXPECT_EQ(read_message(r, true, true).status, 101);
  fltest::send_all(c.get(), "not http at all\r\n\r\n");
  std::string raw;
  ASSERT_TRUE(r.read_n(19, raw));
  EXPECT_EQ(raw, "not http at all\r\n\r\n");
  EXPECT_EQ(upstream_.requests(), 5);
}

TEST_F(HttpFaultTest, LimitsAnswer431And408AndClose) {
  faultline::HttpLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_headers = 10;
  limits.head_timeout_ms = 300;
  ASSERT_TRUE(proxy_.registry->set_http_limits("p", limits).ok());
  {
    UniqueFd c = connect();
    WireReader r(c.get());
    fltest::send_all(c.get(), get("/x", "X-Big: " + std::string(4000, 'a') + "\r\n"));
    Message m = read_message(r, true);
    EXPECT_EQ(m.status, 431);
    EXPECT_EQ(m.header("connection"), "close");
  }
  {
    UniqueFd c = connect();
    WireReader r(c.get());
    std::string many;
    for (int i = 0; i < 12; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
    fltest::send_all(c.get(), get("/x", many));
    EXPECT_EQ(read_message(r, true).status, 431);
  }
  {
    UniqueFd c = connect();
    WireReader r(c.get());
    uint64_t t0 = fltest::monotonic_ns();
    fltest::send_all(c.get(), "GET /slowloris HTTP/1.1\r\nHost: x\r\n");
    Message m = read_message(r, true);
    double ms = double(fltest::monotonic_ns() - t0) / 1e6;
    EXPECT_EQ(m.status, 408);
    EXPECT_GE(ms, 290);
    EXPECT_LT(ms, 2000);
    std::string rest;
    EXPECT_EQ(r.read_rest(rest), 0) << "closed after the 408";
  }
  EXPECT_EQ(upstream_.requests(), 0);
}

TEST_F(HttpFaultTest, MalformedRequestIsAnswered400) {
  add(R"({"type":"status","match":{"path":"/never"},"attributes":{"status":503}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  fltest::send_all(c.get(), "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n");
  EXPECT_EQ(read_message(r, true).status, 400);
  EXPECT_EQ(upstream_.requests(), 0);
}

TEST_F(HttpFaultTest, FaultsChangeBetweenRequestsOfAnOpenConnection) {
  add(R"({"name":"first","type":"status","attributes":{"status":503}})");
  UniqueFd c = connect();
  WireReader r(c.get());
  fltest::send_all(c.get(), get("/a"));
  EXPECT_EQ(read_message(r, true).status, 503);
  ASSERT_TRUE(proxy_.registry->remove_http_fault("p", "first").ok());
  fltest::send_all(c.get(), get("/a"));
  EXPECT_EQ(read_message(r, true).status, 200);
  add(R"({"name":"second","type":"status","attributes":{"status":502}})");
  fltest::send_all(c.get(), get("/a"));
  EXPECT_EQ(read_message(r, true).status, 502);
}

}  // namespace

namespace {

// The plain-receive path (one buffer per direction, no read-ahead): pipelined
// requests wait in the client's only buffer while the exchange before them ends.
TEST(HttpFaultPlainReceive, PipeliningFaultsAndCutsWithOneBufferPerDirection) {
  Upstream upstream;
  auto proxy = fltest::start_proxy(upstream.port(), faultline::ReceiveMode::plain, 1, faultline::AcceptMode::single);
  ASSERT_TRUE(proxy.registry);
  auto f = faultline::http_fault_from_json(
      nlohmann::json::parse(R"({"type":"status","match":{"path":"/x"},"attributes":{"status":503}})"));
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(proxy.registry->add_http_fault("p", *f).ok());
  auto cut = faultline::http_fault_from_json(
      nlohmann::json::parse(R"({"type":"truncate","match":{"path":"/big"},"attributes":{"bytes":70000}})"));
  ASSERT_TRUE(proxy.registry->add_http_fault("p", *cut).ok());
  UniqueFd c = fltest::connect_loopback(proxy.port, 10000);
  WireReader r(c.get());
  fltest::send_all(c.get(), get("/a") + get("/x") + get("/chunked") + get("/x"));
  std::vector<int> statuses;
  for (int i = 0; i < 4; ++i) statuses.push_back(read_message(r, true).status);
  EXPECT_EQ(statuses, (std::vector<int>{200, 503, 200, 503}));
  fltest::send_all(c.get(), get("/big"));
  std::string head;
  ASSERT_TRUE(r.read_until("\r\n\r\n", head));
  std::string body;
  EXPECT_EQ(r.read_rest(body), 0);
  EXPECT_EQ(body.size(), 70000u) << "the cut lands inside the fifth 16 KiB read";
  EXPECT_EQ(upstream.requests(), 3);
}

}  // namespace

namespace {

// Many keep-alive connections at once on two workers, each mixing faulted and
// clean requests (some pipelined): every answer is the right one, in order.
TEST(HttpFaultLoad, ManyConnectionsMixFaultedAndCleanRequests) {
  Upstream upstream;
  auto proxy = fltest::start_proxy(upstream.port());
  ASSERT_TRUE(proxy.registry);
  auto f = faultline::http_fault_from_json(nlohmann::json::parse(
      R"({"name":"third","type":"status","percent":30,"match":{"path":"/x"},"attributes":{"status":503,"body":"no"}})"));
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(proxy.registry->add_http_fault("p", *f).ok());
  constexpr int kClients = 24;
  constexpr int kRounds = 40;
  std::atomic<int> wrong{0};
  std::atomic<int> faulted{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      UniqueFd c = fltest::connect_loopback(proxy.port, 10000);
      WireReader r(c.get());
      for (int k = 0; k < kRounds; ++k) {
        const std::string tag = std::to_string(i) + "-" + std::to_string(k);
        // Every other round two requests in one write.
        const bool pipelined = k % 2 == 1;
        std::string out = get("/x/" + tag);
        if (pipelined) out += get("/chunked");
        if (!send_quiet(c.get(), out)) {
          ++wrong;
          return;
        }
        Message m = read_message(r, true);
        if (!m.complete || (m.status == 200 && m.body != "hello /x/" + tag + "\n") ||
            (m.status == 503 && m.body != "no") || (m.status != 200 && m.status != 503))
          ++wrong;
        faulted += m.status == 503;
        if (pipelined) {
          Message m2 = read_message(r, true);
          if (!m2.complete || m2.status != 200 || m2.body != "hello world!") ++wrong;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  const int total = kClients * kRounds;
  EXPECT_GT(faulted.load(), total / 5);
  EXPECT_LT(faulted.load(), total * 2 / 5);
  EXPECT_EQ(upstream.requests(), total - faulted.load() + kClients * kRounds / 2);
}

// A client that gives up during a hang (an SDK's own timeout) leaves nothing
// behind once the hang ends.
TEST(HttpFaultLoad, AClientLeavingDuringAHangIsCleanedUp) {
  Upstream upstream;
  auto proxy = fltest::start_proxy(upstream.port());
  ASSERT_TRUE(proxy.registry);
  auto f = faultline::http_fault_from_json(
      nlohmann::json::parse(R"({"type":"llm","attributes":{"preset":"timeout","hang":300}})"));
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(proxy.registry->add_http_fault("p", *f).ok());
  for (int i = 0; i < 5; ++i) {
    UniqueFd c = fltest::connect_loopback(proxy.port, 10000);
    fltest::send_all(c.get(), get("/v1/messages"));
  }  // closed at once
  for (int i = 0; i < 50 && proxy.registry->stats("p")->connections_active > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(proxy.registry->stats("p")->connections_active, 0u);
  EXPECT_EQ(upstream.requests(), 0);
}

}  // namespace
