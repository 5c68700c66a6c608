// SIGHUP (systemctl reload): a new faultd takes the listeners and the proxies
// over while clients connect through a proxy in a loop: no connection is
// refused or reset, a connection opened before the restart goes on through the
// old process until it closes, the toxics and the API are the successor's, and
// the old process exits once drained.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "faultd_env.h"

namespace fldaemon {
namespace {

int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

// Sends text and reads it back; "" on success, else what went wrong.
std::string echo_once(int fd, const std::string& text) {
  if (::send(fd, text.data(), text.size(), MSG_NOSIGNAL) != ssize_t(text.size()))
    return std::string("send: ") + std::strerror(errno);
  std::string got;
  char b[256];
  while (got.size() < text.size()) {
    const ssize_t n = ::recv(fd, b, sizeof b, 0);
    if (n < 0) return std::string("recv: ") + std::strerror(errno);
    if (n == 0) return "closed after " + std::to_string(got.size()) + " bytes";
    got.append(b, size_t(n));
  }
  return got == text ? "" : "echoed '" + got + "'";
}

// An echo server on 127.0.0.1, a thread per connection.
class EchoServer {
 public:
  EchoServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    (void)!::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    (void)!::listen(fd_, 256);
    (void)!::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        pollfd p{fd_, POLLIN, 0};
        if (stop_) return;
        if (::poll(&p, 1, 100) != 1) continue;
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        std::thread([c] {
          char b[4096];
          for (;;) {
            const ssize_t n = ::recv(c, b, sizeof b, 0);
            if (n <= 0 || ::send(c, b, size_t(n), MSG_NOSIGNAL) != n) break;
          }
          ::close(c);
        }).detach();
      }
    });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  [[nodiscard]] uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST_F(FaultdTest, SighupHandsOverWithoutRefusingAConnection) {
  start_faultd({"--restart-drain", "20s"});
  EchoServer echo;
  TcpReply made =
      http(toxiproxy_port(), "POST", "/proxies",
           R"({"name":"echo","listen":"127.0.0.1:0","upstream":"127.0.0.1:)" + std::to_string(echo.port()) + R"("})");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string listen = nlohmann::json::parse(made.body)["listen"];
  const auto proxy_port = static_cast<uint16_t>(std::stoul(listen.substr(listen.rfind(':') + 1)));
  TcpReply toxic =
      http(toxiproxy_port(), "POST", "/proxies/echo/toxics", R"({"type":"latency","attributes":{"latency":5}})");
  ASSERT_EQ(toxic.status, 200) << toxic.body;
  // A second proxy in HTTP mode: its fault goes over too.
  TcpReply web =
      http(toxiproxy_port(), "POST", "/proxies",
           R"({"name":"web","listen":"127.0.0.1:0","upstream":"127.0.0.1:)" + std::to_string(echo.port()) + R"("})");
  ASSERT_EQ(web.status, 201) << web.body;
  TcpReply fault = http(toxiproxy_port(), "POST", "/proxies/web/http_faults",
                        R"({"name":"down","type":"status","attributes":{"status":503}})");
  ASSERT_EQ(fault.status, 200) << fault.body;

  // A connection from before the restart.
  const int held = connect_to(proxy_port);
  ASSERT_GE(held, 0);
  ASSERT_EQ(echo_once(held, "before"), "");

  // Clients in a loop, through the restart.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::vector<std::string> failures;
  std::thread clients([&] {
    for (int i = 0; !stop; ++i) {
      const int fd = connect_to(proxy_port);
      std::string why =
          fd < 0 ? std::string("connect: ") + std::strerror(errno) : echo_once(fd, "hello " + std::to_string(i));
      if (fd >= 0) ::close(fd);
      if (why.empty())
        ++ok;
      else
        failures.push_back(why);
    }
  });
  std::this_thread::sleep_for(300ms);
  const int before = ok.load();
  const pid_t old_pid = faultd().pid();
  ASSERT_EQ(::kill(old_pid, SIGHUP), 0);
  ASSERT_TRUE(faultd().wait_for("took over from the previous faultd", 20s, fltest::Stream::kStderr))
      << faultd().describe();
  ASSERT_TRUE(faultd().wait_for(" took over; relaying ", 10s, fltest::Stream::kStderr)) << faultd().describe();
  const std::string& log = faultd().err();
  const size_t at = log.find("faultd: pid ");
  ASSERT_NE(at, std::string::npos) << log;
  const pid_t new_pid = std::stoi(log.substr(at + 12));
  ASSERT_NE(new_pid, old_pid);
  std::this_thread::sleep_for(700ms);
  stop = true;
  clients.join();
  // The connection from before still goes through the old process.
  EXPECT_EQ(echo_once(held, "after"), "") << "a connection open across the restart broke";
  EXPECT_TRUE(alive(old_pid)) << "the old faultd left before its connection closed";
  ::close(held);

  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << (ok + failures.size())
                                << " connections failed across the restart; the first: "
                                << (failures.empty() ? "" : failures.front());
  EXPECT_GT(ok.load(), before) << "no connection went through after the restart";

  // The old one drains and exits 0; the proxies and the API are the new one's.
  auto code = faultd().wait(15s);
  ASSERT_TRUE(code) << faultd().describe();
  EXPECT_TRUE(code->is(0)) << faultd().describe();
  TcpReply proxies = http(toxiproxy_port(), "GET", "/proxies");
  ASSERT_EQ(proxies.status, 200) << "the Toxiproxy API after the restart";
  const auto pj = nlohmann::json::parse(proxies.body, nullptr, false);
  ASSERT_TRUE(pj.contains("echo")) << proxies.body;
  EXPECT_EQ(pj["echo"]["toxics"].size(), 1u) << proxies.body;
  TcpReply faults = http(toxiproxy_port(), "GET", "/proxies/web/http_faults");
  EXPECT_EQ(faults.status, 200) << faults.body;
  EXPECT_NE(faults.body.find("\"down\""), std::string::npos) << "the HTTP fault did not go over: " << faults.body;
  EXPECT_EQ(request("GET", "/v1/status").status, 200) << "the local API after the restart";
  const int fd = connect_to(proxy_port);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(echo_once(fd, "new"), "");
  ::close(fd);

  ::kill(new_pid, SIGTERM);
  for (int i = 0; i < 100 && alive(new_pid); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(alive(new_pid)) << "the new faultd did not stop on SIGTERM";
  EXPECT_NE(::access(socket_path().c_str(), F_OK), 0) << "the API socket was left behind";
}

}  // namespace
}  // namespace fldaemon
