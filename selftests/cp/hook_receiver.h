// A webhook receiver for the cp suites (webhooks, guard alerts): the
// project's own HttpServer on a loopback port, served by a thread, keeping
// every request it got.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "userspace/net/http_server.h"
#include "userspace/net/tls_context.h"

namespace fltest {

using namespace std::chrono_literals;

// A webhook receiver: the project's own HTTP server on a loopback port and a
// thread; answers 500 to the first `fail_first` requests, then 200.
class HookReceiver {
 public:
  // With `tls`, an HTTPS receiver.
  explicit HookReceiver(int fail_first = 0, std::shared_ptr<faultline::HttpTlsContext> tls = nullptr)
      : fail_first_(fail_first) {
    auto s = faultline::HttpServer::create();
    if (!s) throw std::runtime_error(s.error().describe());
    server_.emplace(std::move(*s));
    auto handler = [this](const faultline::HttpRequest& r) {
      std::lock_guard lock(mu_);
      got_.push_back(r);
      return faultline::HttpReply::json(static_cast<int>(got_.size()) <= fail_first_ ? 500 : 200, "{}");
    };
    auto addr = tls ? server_->listen_tls("127.0.0.1:0", handler, tls) : server_->listen_tcp("127.0.0.1:0", handler);
    if (!addr) throw std::runtime_error(addr.error().describe());
    url_ = std::string(tls ? "https://" : "http://") + *addr + "/hook";
    stop_ = ::eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] { (void)server_->run(stop_); });
  }
  ~HookReceiver() {
    uint64_t one = 1;
    (void)!::write(stop_, &one, sizeof one);
    thread_.join();
    ::close(stop_);
  }
  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] std::vector<faultline::HttpRequest> requests() {
    std::lock_guard lock(mu_);
    return got_;
  }
  // Waits until `n` requests came (or 10 s passed), then `settle` longer
  // for any that should not come.
  std::vector<faultline::HttpRequest> wait_for(size_t n, std::chrono::milliseconds settle = {}) {
    for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
      if (requests().size() >= n) break;
      std::this_thread::sleep_for(20ms);
    }
    std::this_thread::sleep_for(settle);
    return requests();
  }

 private:
  int fail_first_;
  std::optional<faultline::HttpServer> server_;
  std::string url_;
  int stop_ = -1;
  std::mutex mu_;
  std::vector<faultline::HttpRequest> got_;
  std::thread thread_;
};

}  // namespace fltest
