// The proxies of faultd as Faultline faults: the Toxiproxy API makes them, and
// like every fault they have a hard bound (--toxic-max-duration), the kill
// switches end them and refuse new ones, `faultctl status` lists them and
// `faultctl abort --all` ends them, and /metrics counts them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "userspace/daemon/metrics_text.h"
#include "userspace/net/http_router.h"
#include "userspace/proxy/proxy_registry.h"

namespace faultline {

class ProxyFaults {
 public:
  using Log = std::function<void(const std::string&)>;

  // Starts the proxy workers and the watcher (kill file, bounds; every 100 ms).
  [[nodiscard]] static Result<std::unique_ptr<ProxyFaults>> start(const ProxyOptions& options, uint64_t toxic_max_ns,
                                                                  Log log);
  ~ProxyFaults();
  ProxyFaults(const ProxyFaults&) = delete;
  ProxyFaults& operator=(const ProxyFaults&) = delete;

  // Toxiproxy's REST API over these proxies, behind the browser guard. A request
  // that would start a fault (a toxic added, a proxy taken down) is refused
  // with 403 while a kill switch is on.
  [[nodiscard]] HttpHandler toxiproxy_handler();

  // Every proxy with its toxics, counters and each fault's end, for status.
  [[nodiscard]] nlohmann::json status_json() const;
  // The same as lines under a "PROXIES" heading; empty when there is no proxy.
  [[nodiscard]] std::string status_text() const;
  // Every toxic removed and every proxy up again (abort --all, the kill file).
  // Returns how many faults ended.
  size_t end_all(const std::string& why);
  // The proxy families of /metrics (faultline_proxy_...).
  void append_metrics(MetricsText& m) const;

  [[nodiscard]] ProxyRegistry& registry() { return *registry_; }

  // A restart's handover. The predecessor's handover(): every proxy with its
  // toxics, how long each of its faults has run (the bound keeps counting in the
  // successor), and its listening sockets, whose descriptors the state names
  // ("listeners") and `fds` holds. The successor's adopt(): the same proxies on
  // those inherited sockets. release_listeners(): the predecessor stops
  // accepting (the successor does now) and drains what it has.
  struct Handover {
    nlohmann::json state;
    std::vector<UniqueFd> fds;
  };
  [[nodiscard]] Result<Handover> handover() const;
  [[nodiscard]] Status adopt(const nlohmann::json& state);
  void release_listeners() { registry_->release_listeners(); }

 private:
  ProxyFaults(std::unique_ptr<ProxyRegistry> registry, uint64_t toxic_max_ns, Log log);
  void watch();
  void note_started(const std::string& proxy, const std::string& what);
  void note_ended(const std::string& proxy, const std::string& what);
  void log_upstream_failures();

  std::unique_ptr<ProxyRegistry> registry_;
  const uint64_t toxic_max_ns_;
  Log log_;
  HttpRouter router_;
  // (proxy, "toxic NAME" | "down") -> when it started: what the bound ends.
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::chrono::steady_clock::time_point> started_;
  std::atomic<bool> kill_file_seen_{false};
  // The watcher's own: per proxy, the upstream failures already logged.
  std::map<std::string, uint64_t> upstream_failures_logged_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace faultline
