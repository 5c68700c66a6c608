// faultctl's side of the local API: one request to faultd over its unix socket,
// or nothing when no faultd answers there (then faultctl works standalone).
#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "userspace/guardrails/http.h"

namespace faultline {

// The reply of faultd to one request, or nothing if faultd is not running at
// path (no socket, nobody listening, not allowed to connect). The request names
// this process's state (bpffs root, state folder): a faultd serving another
// answers 409. An error once
// connected: faultd broke off or answered past the deadline.
[[nodiscard]] std::optional<Result<HttpResponse>> call_faultd(const std::string& socket_path, const std::string& method,
                                                              const std::string& target, uint64_t timeout_ns);

// What a faultctl command printed and its exit code, as faultd's abort routes
// answer it ({"exit_code", "output", "error"}); nothing if the reply is not that.
struct CommandOutput {
  int exit_code = 0;
  std::string out;
  std::string err;
};
[[nodiscard]] std::optional<CommandOutput> command_output(const HttpResponse& reply);

}  // namespace faultline
