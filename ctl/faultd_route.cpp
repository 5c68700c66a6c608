// The faultd side of status, abort and features: FAULTLINE_FAULTD_SOCKET or the
// default socket, a 10 s deadline; anything but a proper answer means standalone.
#include "ctl/faultd_route.h"

#include <signal.h>
#include <unistd.h>

#include <iostream>

#include "base/exit_code.h"
#include "userspace/daemon/faultd_client.h"
#include "userspace/daemon/faultd_config.h"
#include "userspace/run/stop_signals.h"

namespace faultline {
namespace {

constexpr uint64_t kTimeoutNs = 10'000'000'000ULL;

}  // namespace

std::optional<int> report_via_faultd(const std::string& target) {
  auto reply = call_faultd(default_faultd_socket(), "GET", target, kTimeoutNs);
  if (!reply || !*reply || (*reply)->status.code != 200) return std::nullopt;
  std::cout << (*reply)->body << std::flush;
  return 0;
}

std::optional<int> command_via_faultd(const std::string& target) {
  auto reply = call_faultd(default_faultd_socket(), "POST", target, kTimeoutNs);
  if (!reply || !*reply) return std::nullopt;
  auto out = command_output(**reply);
  if (!out) return std::nullopt;
  std::cout << out->out << std::flush;
  std::cerr << out->err << std::flush;
  return out->exit_code;
}

std::optional<int> run_via_faultd(const nlohmann::json& request) {
  std::optional<ServedRunEnd> end;
  int unserved_signal = 0;
  {
    // The signals are ours from before the request: one that comes while
    // faultd starts the run is forwarded once the stream is there.
    StopSignals signals(true);
    ServedRunOutput print{[](const std::string& s) { std::cout << s << std::flush; },
                          [](const std::string& s) { std::cerr << s << std::flush; }};
    end = call_faultd_run(default_faultd_socket(), request, signals, print, kTimeoutNs);
    if (!end) unserved_signal = signals.take();
  }
  if (!end) {
    // Nothing was applied; a signal that came meanwhile does what it does
    // to a standalone faultctl before its run starts.
    if (unserved_signal != 0) ::raise(unserved_signal);
    return std::nullopt;
  }
  if (end->exit_code) return *end->exit_code;
  if (!end->left.empty()) {
    std::cerr << "faultctl run: " << end->left << "\n";
  } else {
    std::cerr << "faultctl run: " << end->broken << " (faultctl status shows whether the fault is still on)\n";
  }
  return kExitFailure;
}

}  // namespace faultline
