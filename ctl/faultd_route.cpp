// The faultd side of status, abort and features: FAULTLINE_FAULTD_SOCKET or the
// default socket, a 10 s deadline; anything but a proper answer means standalone.
#include "ctl/faultd_route.h"

#include <iostream>

#include "userspace/daemon/faultd_client.h"
#include "userspace/daemon/faultd_config.h"

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

}  // namespace faultline
