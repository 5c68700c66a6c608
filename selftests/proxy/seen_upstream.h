// A plain HTTP/1.1 upstream on 127.0.0.1 for proxy and guard tests: one
// request per connection, answered "upstream saw <request line>" with
// Connection: close; it counts what reached it and keeps every request head.
#pragma once

#include <sys/socket.h>

#include <mutex>
#include <string>
#include <vector>

#include "selftests/proxy/proxy_fixture.h"

namespace fltest {

class SeenUpstream {
 public:
  SeenUpstream()
      : server_([this](UniqueFd fd) {
          std::string head;
          char b[4096];
          while (head.find("\r\n\r\n") == std::string::npos) {
            ssize_t n = ::recv(fd.get(), b, sizeof b, 0);
            if (n <= 0) return;
            head.append(b, size_t(n));
          }
          {
            std::lock_guard lock(mu_);
            heads_.push_back(head);
          }
          const std::string body = "upstream saw " + head.substr(0, head.find("\r\n"));
          send_all(fd.get(), "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
        }) {}
  [[nodiscard]] uint16_t port() const { return server_.port(); }
  [[nodiscard]] std::string host() const { return "127.0.0.1:" + std::to_string(port()); }
  [[nodiscard]] std::string hostport() const { return host(); }
  [[nodiscard]] std::string url(const std::string& path) const { return "http://" + host() + path; }
  [[nodiscard]] int requests() {
    std::lock_guard lock(mu_);
    return static_cast<int>(heads_.size());
  }
  [[nodiscard]] std::vector<std::string> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> heads_;
  ScriptServer server_;
};

}  // namespace fltest
