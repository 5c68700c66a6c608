// What the proxy tests share: loopback servers (an epoll echo server for many
// connections, a scripted server that runs a function per connection), blocking
// client helpers with deadlines, and a registry with one proxy in front of a server.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "userspace/proxy/proxy_registry.h"

namespace fltest {

using faultline::UniqueFd;

// A listening socket on 127.0.0.1, port picked by the kernel.
[[nodiscard]] UniqueFd listen_loopback(uint16_t* port);
// A connected blocking socket to 127.0.0.1:port, receive timeout `timeout_ms`.
[[nodiscard]] UniqueFd connect_loopback(uint16_t port, int timeout_ms = 10000);
[[nodiscard]] uint16_t port_of(const std::string& host_port);

void send_all(int fd, const std::string& data);

// How a read to the end went: the bytes, and what ended it (0: EOF, ECONNRESET,
// EAGAIN: the receive timeout), and when (seconds since the call).
struct ReadEnd {
  std::string data;
  int err = 0;
  double seconds = 0;
};
// Reads until EOF, an error, the timeout or `limit` bytes.
[[nodiscard]] ReadEnd read_to_end(int fd, size_t limit = SIZE_MAX);
// Reads exactly n bytes (fewer on EOF/error/timeout).
[[nodiscard]] std::string read_exact(int fd, size_t n);

// Deterministic bytes, so a relay that reorders or drops shows.
[[nodiscard]] std::string pattern(size_t n, uint32_t seed);

// Echoes every byte back; a FIN from the client is answered with a FIN once all
// echoed. One epoll thread: thousands of connections cost no threads.
class EchoServer {
 public:
  EchoServer();
  ~EchoServer();
  [[nodiscard]] uint16_t port() const { return port_; }

 private:
  void run();
  UniqueFd listener_;
  UniqueFd epoll_;
  UniqueFd stop_;
  uint16_t port_ = 0;
  std::thread thread_;
};

// Runs `script` on its own thread for every connection it accepts.
class ScriptServer {
 public:
  explicit ScriptServer(std::function<void(UniqueFd)> script);
  ~ScriptServer();
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] int accepted() const { return accepted_.load(); }

 private:
  UniqueFd listener_;
  uint16_t port_ = 0;
  std::function<void(UniqueFd)> script_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

// A registry and one proxy "p" to 127.0.0.1:upstream_port, listening on a picked port.
struct ProxyUnderTest {
  std::unique_ptr<faultline::ProxyRegistry> registry;
  uint16_t port = 0;
};
[[nodiscard]] ProxyUnderTest start_proxy(uint16_t upstream_port,
                                         faultline::ReceiveMode mode = faultline::ReceiveMode::automatic,
                                         unsigned workers = 2,
                                         faultline::AcceptMode accept = faultline::AcceptMode::automatic);

// A toxic from its Toxiproxy JSON text; fails the test on bad input.
[[nodiscard]] faultline::Toxic toxic(const std::string& json_text);

// Milliseconds for one request/response of `size` bytes over fd (echo server behind).
[[nodiscard]] double round_trip_ms(int fd, size_t size = 64);

// Raises RLIMIT_NOFILE to at least n (as root past the hard limit); the limit reached.
uint64_t raise_fd_limit(uint64_t n);

}  // namespace fltest
