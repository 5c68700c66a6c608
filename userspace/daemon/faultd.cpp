// Listeners, the stop signals as an fd the server watches, the ready line.
#include "userspace/daemon/faultd.h"

#include <signal.h>
#include <sys/signalfd.h>

#include <filesystem>
#include <sstream>

#include "base/exit_code.h"
#include "base/files.h"
#include "base/unique_fd.h"
#include "userspace/daemon/faultd_api.h"
#include "userspace/daemon/proxy_faults.h"
#include "userspace/net/http_server.h"
#include "userspace/ops/features_report.h"
#include "userspace/state/state_dir.h"

namespace faultline {
namespace {

int fail(const FaultdHooks& hooks, const Error& e) {
  hooks.log("faultd: " + e.describe());
  return e.bad_input ? kExitBadInput : kExitFailure;
}

}  // namespace

int serve_faultd(const FaultdConfig& config, const FaultdHooks& hooks) {
  // SIGTERM and SIGINT become readable on an fd; SIGPIPE is ignored (a client
  // that hangs up mid-reply is only a closed connection).
  sigset_t stop_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGTERM);
  sigaddset(&stop_set, SIGINT);
  if (sigprocmask(SIG_BLOCK, &stop_set, nullptr) != 0) return fail(hooks, errno_error("sigprocmask"));
  ::signal(SIGPIPE, SIG_IGN);
  UniqueFd stop(signalfd(-1, &stop_set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!stop) return fail(hooks, errno_error("signalfd"));

  const std::string dir = std::filesystem::path(config.socket_path).parent_path().string();
  if (dir == state_root()) {
    if (auto st = ensure_private_dir(dir, true); !st) return fail(hooks, st.error());
  }
  auto server = HttpServer::create();
  if (!server) return fail(hooks, server.error());
  server->set_log([&hooks](const HttpExchange& x) {
    std::string who = x.peer.has_credentials
                          ? "pid " + std::to_string(x.peer.pid) + " uid " + std::to_string(x.peer.uid)
                          : x.peer.address;
    hooks.log("faultd: " + std::string(x.method) + " " + std::string(x.path) + " " + std::to_string(x.status) + " (" +
              who + ")");
  });
  // The proxies and Toxiproxy's API, unless --toxiproxy off.
  std::unique_ptr<ProxyFaults> proxies;
  if (!config.toxiproxy_address.empty()) {
    ProxyOptions po;
    po.workers = config.proxy_workers;
    auto started = ProxyFaults::start(po, config.toxic_max_ns, hooks.log);
    if (!started) return fail(hooks, started.error());
    proxies = std::move(*started);
  }
  const HttpRouter api = local_api_router(proxies.get());
  const HttpRouter metrics = metrics_router(proxies.get());
  if (auto st = server->listen_unix(config.socket_path, 0600, root_only(same_state_only(api.handler()))); !st)
    return fail(hooks, st.error());
  std::string where = "API on " + config.socket_path;
  if (!config.metrics_address.empty()) {
    auto bound = server->listen_tcp(config.metrics_address, metrics.handler());
    if (!bound) return fail(hooks, bound.error());
    where += ", metrics on http://" + *bound + "/metrics";
  } else {
    where += ", metrics off";
  }
  if (proxies) {
    auto bound = server->listen_tcp(config.toxiproxy_address, proxies->toxiproxy_handler());
    if (!bound) return fail(hooks, bound.error());
    const ProxyIoPaths io = proxies->registry().io_paths();
    where += ", Toxiproxy API on http://" + *bound + " (" + std::to_string(io.workers) + " proxy workers, " +
             (io.buffer_ring ? "buffer ring" : "plain receive") + ", " +
             (io.multishot_accept ? "multishot accept" : "one accept per connection") + ")";
  } else {
    where += ", Toxiproxy API off";
  }
  // Probe the kernel once now: /v1/features answers from the cache.
  {
    std::ostringstream discard;
    (void)write_features(true, discard);
  }
  hooks.ready(where);
  auto st = server->run(stop.get());
  hooks.stopping();
  if (!st) return fail(hooks, st.error());
  return kExitCompleted;
}

}  // namespace faultline
