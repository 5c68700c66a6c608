// A blocking HTTP/1.1 client for the API tests (one connection per request),
// and faultcp's API served in-process on a loopback port by a thread of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cp/api/control_plane.h"
#include "cp_env.h"
#include "userspace/net/http_server.h"

namespace fltest {

struct CpReply {
  int status = 0;
  std::string head;
  std::string body;
  [[nodiscard]] nlohmann::json json() const;  // null if the body is not JSON
  [[nodiscard]] std::string describe() const { return std::to_string(status) + " " + body; }
};

// METHOD path with an optional bearer token and body; status 0 if the
// connection failed or no whole reply came within the timeout.
[[nodiscard]] CpReply cp_request(uint16_t port, const std::string& method, const std::string& path,
                                 const std::string& token = "", const std::string& body = "", int timeout_ms = 10'000,
                                 const std::vector<std::pair<std::string, std::string>>& headers = {});

// The control plane on 127.0.0.1:<port>, its database fresh for the test.
class CpServer {
 public:
  CpServer(Backend backend, faultline::cp::ControlPlaneConfig config);
  ~CpServer();
  CpServer(const CpServer&) = delete;
  CpServer& operator=(const CpServer&) = delete;

  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] const std::string& database_url() const { return db_.url(); }
  [[nodiscard]] CpReply call(const std::string& method, const std::string& path, const std::string& token = "",
                             const std::string& body = "", int timeout_ms = 10'000) const {
    return cp_request(port_, method, path, token, body, timeout_ms);
  }

 private:
  TestDatabase db_;
  std::unique_ptr<faultline::cp::Store> store_;
  std::optional<faultline::HttpServer> server_;
  std::unique_ptr<faultline::cp::ControlPlane> api_;
  uint16_t port_ = 0;
  int stop_ = -1;
  std::thread thread_;
};

// The test settings: quick scrypt, short polls and leases.
[[nodiscard]] faultline::cp::ControlPlaneConfig test_config();

}  // namespace fltest
