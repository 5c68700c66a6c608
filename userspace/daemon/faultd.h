// faultd's life: listen on the local API socket and /metrics, say it is ready,
// serve until SIGTERM or SIGINT, remove the socket. It holds nothing that a
// running fault needs: faults live in pinned maps and end by their deadline.
//
// SIGHUP (systemctl reload) restarts it without refusing a connection: a new
// faultd is started from the same binary and arguments and handed, across
// exec, every listening socket (the API's, /metrics', Toxiproxy's, the guard
// gateway's and each proxy's) with the proxies' state (toxics, and how long
// each has run, so its bound keeps counting). Once the successor serves, the old process stops
// accepting, relays the connections it already has for at most
// --restart-drain, and exits. A successor that does not start leaves the old
// one serving as before.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "userspace/daemon/faultd_config.h"
#include "userspace/daemon/run_service.h"

namespace faultline {

// The environment variable that names, in a successor, the descriptor of the
// handover state (a memfd of JSON).
inline constexpr const char* kFaultdHandoverEnv = "FAULTLINE_FAULTD_HANDOVER";

struct FaultdHooks {
  std::function<void(const std::string&)> ready;  // serving; the argument says where
  std::function<void()> stopping;                 // a stop signal came; closing
  std::function<void(const std::string&)> log;    // one line, no newline
  // SIGHUP: the command line that starts a successor (argv[0] is replaced by
  // this binary, /proc/self/exe); empty: SIGHUP is ignored.
  std::vector<std::string> argv;
  // The successor serves; this process drains and exits (systemd: MAINPID=).
  std::function<void(pid_t)> handed_over;
  // What this faultd reports as its version (to the control plane): the
  // binary's version string, which lives with main, not in this library.
  std::string version;
  // Listening sockets the service manager passed at start, by name ("api",
  // "metrics", "toxiproxy"; systemd's LISTEN_FDS from its file descriptor
  // store): used as they are instead of binding anew, so a stop and a start
  // (systemctl restart) refuses no connection.
  std::map<std::string, int> listeners;
  // Hands each listener, once it listens, to the service manager to keep
  // across a stop and a start; true if it keeps them. Then a stop leaves the
  // sockets, and the API socket's file, to the next start.
  std::function<bool(const std::string& name, int fd)> store_listener;
};

// Serves in this process until SIGTERM or SIGINT, or until a successor took
// over (SIGHUP) and the connections left here drained; the exit code (0 after a
// clean stop, 1 when it could not start, 2 on bad input such as a bad address).
[[nodiscard]] int serve_faultd(const FaultdConfig& config, const FaultdHooks& hooks);

}  // namespace faultline
