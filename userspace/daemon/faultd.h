// faultd's life: listen on the local API socket and /metrics, say it is ready,
// serve until SIGTERM or SIGINT, remove the socket. It holds nothing that a
// running fault needs: faults live in pinned maps and end by their deadline.
#pragma once

#include <functional>
#include <string>

#include "userspace/daemon/faultd_config.h"

namespace faultline {

struct FaultdHooks {
  std::function<void(const std::string&)> ready;  // serving; the argument says where
  std::function<void()> stopping;                 // a stop signal came; closing
  std::function<void(const std::string&)> log;    // one line, no newline
};

// Serves in this process until SIGTERM or SIGINT; the exit code (0 after a
// clean stop, 1 when it could not start, 2 on bad input such as a bad address).
[[nodiscard]] int serve_faultd(const FaultdConfig& config, const FaultdHooks& hooks);

}  // namespace faultline
