// faultctl's side of the local API: one request to faultd over its unix socket,
// or nothing when no faultd answers there (then faultctl works standalone).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/result.h"
#include "userspace/guardrails/http.h"
#include "userspace/run/stop_signals.h"

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

// A run faultd serves (POST /v1/runs, the stream of userspace/daemon/run_service.h):
// what it printed goes to `out` and `err` as it comes, each stop signal from
// `stop` goes to faultd. How it ended:
struct ServedRunEnd {
  std::optional<int> exit_code;  // the run's exit code
  std::string left;              // or: faultd stopped and left the fault on (why, for people)
  std::string broken;            // or: the stream broke off (how)
};
struct ServedRunOutput {
  std::function<void(const std::string&)> out, err;
};
// Nothing when faultd did not take the run (no faultd, another state, an old
// faultd that answers 501, no answer in time): nothing was applied, and
// faultctl runs it standalone.
[[nodiscard]] std::optional<ServedRunEnd> call_faultd_run(const std::string& socket_path, const nlohmann::json& request,
                                                          StopSource& stop, const ServedRunOutput& print,
                                                          uint64_t head_timeout_ns);

}  // namespace faultline
