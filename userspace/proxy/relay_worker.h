// One io_uring event loop on its own thread: the listeners of every proxy (one
// socket of each SO_REUSEPORT group), the connections they accept, and the toxics
// applied chunk by chunk. Only the worker's thread touches its state; the control
// path talks to it through a command queue woken by an eventfd.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/proxy/endpoint.h"
#include "userspace/proxy/proxy_registry.h"
#include "userspace/proxy/request_judge.h"
#include "userspace/proxy/toxic_plan.h"

namespace faultline {

struct alignas(64) ProxyCounters {
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> active{0};
  std::atomic<uint64_t> bytes_upstream{0};
  std::atomic<uint64_t> bytes_downstream{0};
  std::atomic<uint64_t> ring_empty{0};
  std::atomic<uint64_t> unrouted{0};
  // Connections closed after accept because their upstream could not be had:
  // its name did not resolve (or the text is no host:port), or the connect failed.
  std::atomic<uint64_t> upstream_unresolved{0};
  std::atomic<uint64_t> upstream_unreachable{0};
  // Why the last one failed, for the log and the API ("cannot resolve db: ...").
  std::mutex why_mu;
  std::string last_upstream_failure;
  void upstream_failed(std::atomic<uint64_t>& counter, std::string why) {
    {
      std::lock_guard lock(why_mu);
      last_upstream_failure = std::move(why);
    }
    counter.fetch_add(1, std::memory_order_relaxed);
  }
};

// Where a proxy's accepted connections go: one upstream, or (transparent) where
// each client asked to go.
struct ProxyRoute {
  SocketAddress upstream;
  std::function<std::optional<SocketAddress>(int accepted_fd)> original_destination;
  uint32_t mark = 0;  // SO_MARK of the upstream sockets; 0 = none
  // A forward proxy (ProxyConfig::forward): no upstream until a request names
  // one, every request judged. `name` is the proxy's, for RequestHead::proxy.
  std::shared_ptr<RequestJudge> judge;
  std::string proxy_authorization;
  std::function<std::optional<std::string>(std::string_view)> authenticate;  // ForwardProxy::authenticate
  std::function<std::optional<std::string>(std::string_view, std::string_view)> own_answer;  // ForwardProxy's
  std::string name;
  // A named upstream ("db:5432"): resolved for each connection off the
  // worker's thread, as Toxiproxy dials each one, so a proxy may be made before
  // its upstream exists. Empty: `upstream` is numeric.
  std::string upstream_host;
  uint16_t upstream_port = 0;
  // Non-empty: the upstream text is no address at all ("nonsense"); Toxiproxy
  // takes it too, and each connection is closed after accept with this reason.
  std::string upstream_unusable;
};

struct WorkerConfig {
  bool buffer_ring = false;
  bool multishot_accept = false;
  uint32_t buffer_size = 16384;
  uint32_t ring_buffers = 1024;
  uint32_t ring_entries = 4096;
};

class RelayWorker {
 public:
  [[nodiscard]] static Result<std::unique_ptr<RelayWorker>> start(const WorkerConfig& config);
  ~RelayWorker();  // stops the loop, closes everything it owns
  RelayWorker(const RelayWorker&) = delete;
  RelayWorker& operator=(const RelayWorker&) = delete;

  // Each returns once the worker has applied it.
  void start_proxy(uint64_t id, UniqueFd listener, ProxyRoute route, std::shared_ptr<const ToxicSet> toxics,
                   std::shared_ptr<ProxyCounters> counters);
  void stop_proxy(uint64_t id);        // closes the listener and every connection
  void release_listener(uint64_t id);  // stops accepting (no shutdown: a successor has the socket)
  // Every worker takes the toxics on its own loop, all of them at once; returns
  // once each has. Side by side, not one worker after the other: the toxic is
  // on every connection after one wake-up's wait, not one per worker.
  static void set_toxics(const std::vector<std::unique_ptr<RelayWorker>>& workers, uint64_t id,
                         const std::shared_ptr<const ToxicSet>& toxics);

  class Loop;

 private:
  explicit RelayWorker(std::unique_ptr<Loop> loop);
  void call(std::function<void(Loop&)> fn);
  // Posts fn to the loop; the future is ready once it ran.
  std::future<void> post_call(std::function<void(Loop&)> fn);
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace faultline
