// A blocking request over the unix socket with one deadline, read with the
// guardrails' strict response reader.
#include "userspace/daemon/faultd_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/unique_fd.h"
#include "loader/bpffs.h"
#include "userspace/daemon/faultd_api.h"
#include "userspace/state/state_dir.h"

namespace faultline {
namespace {

int remaining_ms(uint64_t deadline) {
  const uint64_t now = monotonic_ns();
  return now >= deadline ? 0 : static_cast<int>((deadline - now + 999'999) / 1'000'000);
}

Result<HttpResponse> exchange(int fd, const std::string& request, uint64_t deadline) {
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("send to faultd");
    sent += static_cast<size_t>(n);
  }
  HttpResponseReader reader;
  char buf[16 * 1024];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ms = remaining_ms(deadline);
    if (ms == 0) return make_error(ETIMEDOUT, "faultd did not answer in time");
    const int rc = ::poll(&p, 1, ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return errno_error("poll");
    if (rc == 0) continue;  // the deadline check above ends it
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("recv from faultd");
    if (n == 0) {
      FL_TRY(reader.close());
      return reader.take();
    }
    auto done = reader.feed(std::string_view(buf, static_cast<size_t>(n)));
    if (!done) return done.error();
    if (*done) return reader.take();
  }
}

}  // namespace

std::optional<Result<HttpResponse>> call_faultd(const std::string& socket_path, const std::string& method,
                                                const std::string& target, uint64_t timeout_ns) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) return std::nullopt;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return std::nullopt;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return std::nullopt;
  // The state this process means: faultd answers 409 if it serves another.
  const std::string request = method + " " + target + " HTTP/1.1\r\nHost: faultd\r\nAccept: application/json\r\n" +
                              kBpffsRootHeader + ": " + bpffs_layout().root + "\r\n" + kRunDirHeader + ": " +
                              state_root() + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  return exchange(fd.get(), request, monotonic_ns() + timeout_ns);
}

std::optional<CommandOutput> command_output(const HttpResponse& reply) {
  nlohmann::json j = nlohmann::json::parse(reply.body, nullptr, false);
  if (!j.is_object() || !j.contains("exit_code") || !j["exit_code"].is_number_integer() || !j.contains("output") ||
      !j["output"].is_string() || !j.contains("error") || !j["error"].is_string())
    return std::nullopt;
  return CommandOutput{j["exit_code"].get<int>(), j["output"].get<std::string>(), j["error"].get<std::string>()};
}

}  // namespace faultline
