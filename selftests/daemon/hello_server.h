// A real upstream for the Toxiproxy API tests: accepts on 127.0.0.1 (a free
// port), answers "hello\n" to whatever a connection sends first, then closes it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace fltest {

class HelloServer {
 public:
  HelloServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    (void)::listen(fd_, 64);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) != 1) continue;
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        char b[256];
        if (::recv(c, b, sizeof b, 0) > 0) (void)!::send(c, "hello\n", 6, MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~HelloServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace fltest
