// faultd's Toxiproxy API with Faultline's extensions: their bad values get
// Toxiproxy's envelope naming the attribute, and an API that never stalls:
// a toxic added and removed 1,000 times while 50 connections stream through
// the proxy, every call answered quickly and no connection cut.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "faultd_env.h"
#include "selftests/lib/clock.h"
#include "selftests/lib/loopback_port.h"

namespace fldaemon {
// Named: the unity build puts this file beside others with their own helpers.
namespace toxiproxy_extensions {
namespace {

using json = nlohmann::json;

uint16_t port_of(const std::string& hostport) {
  return static_cast<uint16_t>(std::stoi(hostport.substr(hostport.rfind(':') + 1)));
}

int connect_to(uint16_t port) {
  const int fd = fltest::connect_loopback(port);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Echoes every byte back, one poll thread for every connection.
class EchoServer {
 public:
  EchoServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    (void)::listen(listener_, 128);
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
    for (const pollfd& p : fds_) ::close(p.fd);
  }
  [[nodiscard]] uint16_t port() const { return port_; }

 private:
  void run() {
    fds_.push_back({listener_, POLLIN, 0});
    char buf[16384];
    while (!stop_) {
      if (::poll(fds_.data(), fds_.size(), 100) <= 0) continue;
      for (size_t i = 0; i < fds_.size(); ++i) {
        if ((fds_[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        if (fds_[i].fd == listener_) {
          const int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c >= 0) fds_.push_back({c, POLLIN, 0});
          continue;
        }
        const ssize_t n = ::recv(fds_[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
          (void)!::send(fds_[i].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
        } else if (n == 0 || errno != EAGAIN) {
          ::close(fds_[i].fd);
          fds_.erase(fds_.begin() + static_cast<long>(i));
          --i;
        }
      }
    }
  }
  int listener_ = -1;
  uint16_t port_ = 0;
  std::vector<pollfd> fds_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class ToxiproxyExtensions : public FaultdTest {
 protected:
  [[nodiscard]] TcpReply api(const std::string& method, const std::string& path, const std::string& body = "") {
    return http(toxiproxy_port(), method, path, body);
  }
};

TEST_F(ToxiproxyExtensions, BadValuesGetToxiproxysEnvelopeNamingTheAttribute) {
  start_faultd();
  ASSERT_NE(toxiproxy_port(), 0) << faultd().err();
  EchoServer echo;
  ASSERT_EQ(api("POST", "/proxies",
                R"({"name":"web","listen":"127.0.0.1:0","upstream":"127.0.0.1:)" + std::to_string(echo.port()) + "\"}")
                .status,
            201);
  struct Case {
    std::string method, path, body;
    int status;
    std::string error;  // the whole "error"; empty: success
    json attributes;    // on success: the toxic's attributes as shown
  };
  const std::vector<Case> cases = {
      {"POST",
       "/proxies/web/toxics",
       R"({"type":"reset_peer","attributes":{"timeout":0,"first_n":-1}})",
       400,
       R"(bad request body: toxic: "attributes.first_n": must not be negative, got -1)",
       {}},
      {"POST",
       "/proxies/web/toxics",
       R"({"type":"latency","attributes":{"first_n":"3"}})",
       400,
       R"(bad request body: toxic: "attributes.first_n": must be an integer, got "3")",
       {}},
      {"POST",
       "/proxies/web/toxics",
       R"({"type":"limit_time","attributes":{"time":-1}})",
       400,
       R"(bad request body: toxic: "attributes.time": must not be negative, got -1)",
       {}},
      {"POST",
       "/proxies/web/toxics",
       R"({"type":"slow_open","attributes":{"delay":1.5}})",
       400,
       R"(bad request body: toxic: "attributes.delay": must be an integer, got 1.5)",
       {}},
      {"POST", "/proxies/web/toxics", R"({"type":"reset_peer","attributes":{"timeout":0,"first_n":3}})", 200, "",
       json{{"timeout", 0}, {"first_n", 3}}},
      {"POST", "/proxies/web/toxics", R"({"type":"limit_time","attributes":{"time":500}})", 200, "",
       json{{"time", 500}}},
      {"POST", "/proxies/web/toxics", R"({"type":"slow_open","stream":"upstream","attributes":{"delay":200}})", 200, "",
       json{{"delay", 200}}},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","attributes":{"latency":5}})", 200, "",
       json{{"latency", 5}, {"jitter", 0}}},  // first_n unset: Toxiproxy's shape
      {"PATCH",
       "/proxies/web/toxics/slow_open_upstream",
       R"({"attributes":{"delay":-5}})",
       400,
       R"(bad request body: toxic: "attributes.delay": must not be negative, got -5)",
       {}},
      {"PATCH",
       "/proxies/web/toxics/reset_peer_downstream",
       R"({"attributes":{"first_n":-2}})",
       400,
       R"(bad request body: toxic: "attributes.first_n": must not be negative, got -2)",
       {}},
  };
  for (const Case& c : cases) {
    const TcpReply r = api(c.method, c.path, c.body);
    const json j = json::parse(r.body, nullptr, false);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.path << " " << c.body << ": " << r.body;
    if (c.status >= 400) {
      EXPECT_EQ(j.value("error", ""), c.error) << c.body;
      EXPECT_EQ(j.value("status", 0), c.status) << c.body;
    } else {
      EXPECT_EQ(j.value("attributes", json()), c.attributes) << c.body;
    }
  }
  // The refused updates changed nothing.
  const json rp = json::parse(api("GET", "/proxies/web/toxics/reset_peer_downstream").body, nullptr, false);
  EXPECT_EQ(rp.value("attributes", json()), (json{{"timeout", 0}, {"first_n", 3}}));
  const json so = json::parse(api("GET", "/proxies/web/toxics/slow_open_upstream").body, nullptr, false);
  EXPECT_EQ(so.value("attributes", json()), (json{{"delay", 200}}));
}

// 50 connections stream 1 KiB ping-pongs through the proxy (one poll thread)
// while the API adds and removes a latency toxic 1,000 times: every call is
// answered, the p99 of the calls is printed (at most 100 ms asserted on this
// loaded machine; the 10 ms target said MET or MISSED), and no connection is
// cut or sees a byte out of place.
TEST_F(ToxiproxyExtensions, TheApiNeverStallsWhileConnectionsStream) {
  start_faultd({}, fltest::Output::kFiles);  // 2,000 request lines would fill a pipe
  ASSERT_NE(toxiproxy_port(), 0) << faultd().err();
  EchoServer echo;
  const TcpReply made =
      api("POST", "/proxies",
          R"({"name":"web","listen":"127.0.0.1:0","upstream":"127.0.0.1:)" + std::to_string(echo.port()) + "\"}");
  ASSERT_EQ(made.status, 201) << made.body;
  const uint16_t proxy_port = port_of(json::parse(made.body)["listen"]);

  constexpr int kConnections = 50;
  constexpr size_t kBlock = 1024;
  std::vector<pollfd> fds;
  for (int i = 0; i < kConnections; ++i) {
    const int fd = connect_to(proxy_port);
    ASSERT_GE(fd, 0);
    fds.push_back({fd, POLLIN, 0});
  }
  std::string block(kBlock, '\0');
  for (size_t i = 0; i < kBlock; ++i) block[i] = static_cast<char>('a' + i % 26);
  std::atomic<bool> stop{false};
  std::atomic<int> cut{0}, corrupt{0};
  std::vector<uint64_t> exchanges(kConnections, 0);
  std::thread streamer([&] {
    std::vector<std::string> got(kConnections);
    for (const pollfd& p : fds) (void)!::send(p.fd, block.data(), kBlock, MSG_NOSIGNAL);
    char buf[kBlock];
    while (!stop) {
      if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = ::recv(fds[i].fd, buf, kBlock - got[i].size(), MSG_DONTWAIT);
        if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
          ++cut;
          fds[i].fd = -fds[i].fd;  // poll ignores it from now on; closed below
          continue;
        }
        if (n < 0) continue;
        got[i].append(buf, static_cast<size_t>(n));
        if (got[i].size() < kBlock) continue;
        if (got[i] != block) ++corrupt;
        got[i].clear();
        ++exchanges[i];
        if (::send(fds[i].fd, block.data(), kBlock, MSG_NOSIGNAL) != static_cast<ssize_t>(kBlock)) ++cut;
      }
    }
  });

  std::vector<double> ms;
  int unanswered = 0;
  for (int i = 0; i < 1000; ++i) {
    for (const bool add : {true, false}) {
      const uint64_t t0 = fltest::monotonic_ns();
      const TcpReply r = add ? api("POST", "/proxies/web/toxics", R"({"type":"latency","attributes":{"latency":1}})")
                             : api("DELETE", "/proxies/web/toxics/latency_downstream");
      ms.push_back(static_cast<double>(fltest::monotonic_ns() - t0) / 1e6);
      if (r.status != (add ? 200 : 204)) {
        ++unanswered;
        if (unanswered <= 3) ADD_FAILURE() << (add ? "add" : "remove") << " " << i << ": " << r.status << " " << r.body;
      }
    }
  }
  // The streams go on a little after the last call, then stop.
  std::this_thread::sleep_for(200ms);
  stop = true;
  streamer.join();
  for (const pollfd& p : fds) ::close(p.fd < 0 ? -p.fd : p.fd);

  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double p50 = sorted[sorted.size() / 2];
  const double p99 = sorted[sorted.size() * 99 / 100];
  const double worst = sorted.back();
  const uint64_t least = *std::min_element(exchanges.begin(), exchanges.end());
  uint64_t total = 0;
  for (uint64_t e : exchanges) total += e;
  std::printf("[ measure  ] %zu API calls while %d connections streamed: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
              ms.size(), kConnections, p50, p99, worst);
  std::printf("[ measure  ] the 10 ms p99 target: %s\n", p99 <= 10.0 ? "MET" : "MISSED");
  std::printf("[ measure  ] %llu ping-pongs of 1 KiB (the fewest on one connection: %llu); %d cut, %d corrupt\n",
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(least), cut.load(),
              corrupt.load());
  EXPECT_EQ(unanswered, 0);
  EXPECT_LE(p99, 100.0) << "the API stalled";
  EXPECT_EQ(cut.load(), 0) << "a connection was cut that no toxic asked to cut";
  EXPECT_EQ(corrupt.load(), 0);
  EXPECT_GT(least, 0u) << "a connection made no progress";
}

}  // namespace
}  // namespace toxiproxy_extensions
}  // namespace fldaemon
