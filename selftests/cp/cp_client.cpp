// The tests' HTTP client and the in-process control plane.
#include "cp_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>

#include "selftests/lib/loopback_port.h"

namespace fltest {

nlohmann::json CpReply::json() const {
  auto j = nlohmann::json::parse(body, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

CpReply cp_request(uint16_t port, const std::string& method, const std::string& path, const std::string& token,
                   const std::string& body, int timeout_ms,
                   const std::vector<std::pair<std::string, std::string>>& headers) {
  CpReply reply;
  const int fd = fltest::connect_loopback(port);
  if (fd < 0) return reply;
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT")
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  size_t sent = 0;
  while (sent < req.size()) {
    ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer (413) before reading it all
    sent += static_cast<size_t>(n);
  }
  std::string in;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[16384];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const auto end = in.find("\r\n\r\n");
  if (in.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return reply;
  reply.status = std::stoi(in.substr(9, 3));
  reply.head = in.substr(0, end);
  reply.body = in.substr(end + 4);
  return reply;
}

faultline::cp::ControlPlaneConfig test_config() {
  faultline::cp::ControlPlaneConfig c;
  c.poll_timeout = std::chrono::milliseconds(1500);
  c.lease = std::chrono::milliseconds(60'000);
  c.lease_sweep = std::chrono::milliseconds(100);
  c.scrypt.log_n = 10;  // 1 MiB: the tests sign in dozens of times
  return c;
}

CpServer::CpServer(Backend backend, faultline::cp::ControlPlaneConfig config) : db_(backend) {
  auto store = faultline::cp::Store::open(db_.url());
  if (!store) throw std::runtime_error(store.error().describe());
  store_ = std::move(*store);
  faultline::HttpServerLimits limits;
  limits.request.max_body = config.max_body;
  auto s = faultline::HttpServer::create(limits);
  if (!s) throw std::runtime_error(s.error().describe());
  server_.emplace(std::move(*s));
  api_ = std::make_unique<faultline::cp::ControlPlane>(*store_, *server_, config);
  auto addr = server_->listen_tcp("127.0.0.1:0", api_->handler());
  if (!addr) throw std::runtime_error(addr.error().describe());
  port_ = static_cast<uint16_t>(std::stoul(addr->substr(addr->rfind(':') + 1)));
  if (auto started = api_->start(); !started) throw std::runtime_error(started.error().describe());
  stop_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { (void)server_->run(stop_); });
}

CpServer::~CpServer() {
  uint64_t one = 1;
  (void)!::write(stop_, &one, sizeof one);
  thread_.join();
  ::close(stop_);
}

}  // namespace fltest
