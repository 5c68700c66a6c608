// Loopback servers and clients for the proxy tests.
#include "selftests/proxy/proxy_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>

#include "selftests/lib/clock.h"

namespace fltest {

UniqueFd listen_loopback(uint16_t* port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  EXPECT_EQ(::listen(fd.get(), 4096), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

UniqueFd connect_loopback(uint16_t port, int timeout_ms) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return UniqueFd();
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

uint16_t port_of(const std::string& host_port) {
  return uint16_t(std::stoi(host_port.substr(host_port.rfind(':') + 1)));
}

void send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << "send: " << strerror(errno);
    off += size_t(n);
  }
}

ReadEnd read_to_end(int fd, size_t limit) {
  ReadEnd end;
  uint64_t start = monotonic_ns();
  char buf[65536];
  while (end.data.size() < limit) {
    ssize_t n = ::recv(fd, buf, std::min(sizeof buf, limit - end.data.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      end.err = n == 0 ? 0 : (errno == EWOULDBLOCK ? EAGAIN : errno);
      break;
    }
    end.data.append(buf, size_t(n));
  }
  end.seconds = double(monotonic_ns() - start) / 1e9;
  return end;
}

std::string read_exact(int fd, size_t n) { return read_to_end(fd, n).data; }

std::string pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s[i] = char(x);
  }
  return s;
}

// --- EchoServer ---------------------------------------------------------------

namespace {
struct EchoConn {
  std::string pending;  // received, not yet echoed
  bool eof = false;
};
}  // namespace

EchoServer::EchoServer() {
  listener_ = listen_loopback(&port_);
  ::fcntl(listener_.get(), F_SETFL, O_NONBLOCK);
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  stop_.reset(::eventfd(0, EFD_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener_.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev);
  ev.data.fd = stop_.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stop_.get(), &ev);
  thread_ = std::thread([this] { run(); });
}

EchoServer::~EchoServer() {
  uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  thread_.join();
}

void EchoServer::run() {
  std::map<int, EchoConn> conns;
  std::vector<epoll_event> events(256);
  char buf[65536];
  auto drop = [&](int fd) {
    ::close(fd);
    conns.erase(fd);
  };
  auto flush = [&](int fd, EchoConn& c) {
    while (!c.pending.empty()) {
      ssize_t n = ::send(fd, c.pending.data(), c.pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) return errno == EAGAIN;
      c.pending.erase(0, size_t(n));
    }
    if (c.eof) ::shutdown(fd, SHUT_WR);
    return true;
  };
  for (;;) {
    int n = ::epoll_wait(epoll_.get(), events.data(), int(events.size()), -1);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == stop_.get()) {
        for (auto& [cfd, c] : conns) ::close(cfd);
        return;
      }
      if (fd == listener_.get()) {
        for (;;) {
          int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          conns[c];
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
          ev.data.fd = c;
          ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c, &ev);
        }
        continue;
      }
      auto it = conns.find(fd);
      if (it == conns.end()) continue;
      EchoConn& c = it->second;
      bool dead = false;
      // Edge-triggered: go on until the kernel says EAGAIN on the side we wait for
      // (reading, or sending when a megabyte is waiting), or the next edge never comes.
      for (;;) {
        bool read_blocked = c.eof;
        while (!c.eof && c.pending.size() < (1u << 20)) {
          ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
          if (r > 0) {
            c.pending.append(buf, size_t(r));
          } else if (r == 0) {
            c.eof = true;
          } else {
            if (errno != EAGAIN) dead = true;
            read_blocked = true;
            break;
          }
        }
        if (dead || !flush(fd, c)) {
          dead = true;
          break;
        }
        if (!c.pending.empty() || read_blocked) break;  // wait for EPOLLOUT or EPOLLIN
      }
      if (dead || (c.eof && c.pending.empty() && (events[i].events & (EPOLLHUP | EPOLLERR)))) drop(fd);
    }
  }
}

// --- ScriptServer -------------------------------------------------------------

ScriptServer::ScriptServer(std::function<void(UniqueFd)> script) : script_(std::move(script)) {
  listener_ = listen_loopback(&port_);
  acceptor_ = std::thread([this] {
    for (;;) {
      int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (stopping_) {
        if (c >= 0) ::close(c);
        return;
      }
      if (c < 0) continue;
      ++accepted_;
      std::lock_guard lock(mu_);
      threads_.emplace_back([this, c] { script_(UniqueFd(c)); });
    }
  });
}

ScriptServer::~ScriptServer() {
  stopping_ = true;
  ::shutdown(listener_.get(), SHUT_RDWR);
  acceptor_.join();
  std::lock_guard lock(mu_);
  for (auto& t : threads_) t.join();
}

// --- the proxy ----------------------------------------------------------------

ProxyUnderTest start_proxy(uint16_t upstream_port, faultline::ReceiveMode mode, unsigned workers,
                           faultline::AcceptMode accept) {
  ProxyUnderTest p;
  faultline::ProxyOptions options;
  options.workers = workers;
  options.receive = mode;
  options.accept = accept;
  auto reg = faultline::ProxyRegistry::start(options);
  EXPECT_TRUE(reg.ok()) << (reg.ok() ? "" : reg.error().describe());
  if (!reg) return p;
  p.registry = std::move(*reg);
  auto info = p.registry->create({"p", "127.0.0.1:0", "127.0.0.1:" + std::to_string(upstream_port), true});
  EXPECT_TRUE(info.ok()) << (info.ok() ? "" : info.error().describe());
  if (info) p.port = port_of(info->listen_bound);
  return p;
}

faultline::Toxic toxic(const std::string& json_text) {
  auto t = faultline::toxic_from_json(nlohmann::json::parse(json_text));
  EXPECT_TRUE(t.ok()) << json_text << ": " << (t.ok() ? "" : t.error().describe());
  return t.ok() ? *t : faultline::Toxic{};
}

double round_trip_ms(int fd, size_t size) {
  std::string msg = pattern(size, 7);
  uint64_t start = monotonic_ns();
  send_all(fd, msg);
  std::string back = read_exact(fd, size);
  EXPECT_EQ(back, msg);
  return double(monotonic_ns() - start) / 1e6;
}

uint64_t raise_fd_limit(uint64_t n) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur >= n) return rl.rlim_cur;
  rlimit want{n, std::max<rlim_t>(n, rl.rlim_max)};
  if (::setrlimit(RLIMIT_NOFILE, &want) != 0) {
    want.rlim_cur = rl.rlim_max;
    want.rlim_max = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &want);
  }
  ::getrlimit(RLIMIT_NOFILE, &rl);
  return rl.rlim_cur;
}

}  // namespace fltest
