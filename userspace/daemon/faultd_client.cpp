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

UniqueFd connect_faultd(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) return UniqueFd();
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return UniqueFd();
  return fd;
}

// The head of a request naming this process's state: faultd answers 409 if it serves another.
std::string request_head(const std::string& method, const std::string& target, size_t body_size) {
  return method + " " + target + " HTTP/1.1\r\nHost: faultd\r\nAccept: application/json\r\n" + kBpffsRootHeader + ": " +
         bpffs_layout().root + "\r\n" + kRunDirHeader + ": " + state_root() +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body_size) +
         "\r\nConnection: close\r\n\r\n";
}

bool send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += size_t(n);
  }
  return true;
}

// The stream's lines after the head, until its last frame or its end.
ServedRunEnd follow_run(int fd, std::string in, StopSource& stop, const ServedRunOutput& print) {
  char buf[16 * 1024];
  for (;;) {
    for (size_t nl = in.find('\n'); nl != std::string::npos; nl = in.find('\n')) {
      const nlohmann::json f = nlohmann::json::parse(in.substr(0, nl), nullptr, false);
      in.erase(0, nl + 1);
      if (!f.is_object()) return ServedRunEnd{std::nullopt, "", "faultd sent a line that is not a frame"};
      if (f.contains("out") && f["out"].is_string()) print.out(f["out"].get<std::string>());
      if (f.contains("err") && f["err"].is_string()) print.err(f["err"].get<std::string>());
      if (f.contains("exit_code") && f["exit_code"].is_number_integer())
        return ServedRunEnd{f["exit_code"].get<int>(), "", ""};
      if (f.contains("left") && f["left"].is_string())
        return ServedRunEnd{std::nullopt, f["left"].get<std::string>(), ""};
    }
    if (const int sig = stop.take(); sig != 0) {
      // faultd ends the fault and says how; the connection stays open for that.
      if (!send_all(fd, "signal " + std::to_string(sig) + "\n"))
        return ServedRunEnd{std::nullopt, "", "faultd's connection broke"};
    }
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, 100);
    if (rc < 0 && errno != EINTR) return ServedRunEnd{std::nullopt, "", std::string("poll: ") + std::strerror(errno)};
    if (rc <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ServedRunEnd{std::nullopt, "", "faultd closed the connection before the run ended"};
    in.append(buf, size_t(n));
  }
}

}  // namespace

std::optional<ServedRunEnd> call_faultd_run(const std::string& socket_path, const nlohmann::json& request,
                                            StopSource& stop, const ServedRunOutput& print, uint64_t head_timeout_ns) {
  UniqueFd fd = connect_faultd(socket_path);
  if (!fd) return std::nullopt;
  const std::string body = request.dump();
  if (!send_all(fd.get(), request_head("POST", "/v1/runs", body.size()) + body)) return std::nullopt;
  // Until the head of a 200 comes, nothing is applied: anything else means standalone.
  const uint64_t deadline = monotonic_ns() + head_timeout_ns;
  std::string in;
  char buf[4096];
  size_t end = std::string::npos;
  while ((end = in.find("\r\n\r\n")) == std::string::npos) {
    if (in.size() > 16 * 1024) return std::nullopt;
    pollfd p{fd.get(), POLLIN, 0};
    const int ms = remaining_ms(deadline);
    if (ms == 0) return std::nullopt;
    const int rc = ::poll(&p, 1, ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    in.append(buf, size_t(n));
  }
  if (!in.starts_with("HTTP/1.1 200 ") && !in.starts_with("HTTP/1.0 200 ")) return std::nullopt;
  const std::string head = in.substr(0, end);
  if (head.find("application/x-ndjson") == std::string::npos) return std::nullopt;
  return follow_run(fd.get(), in.substr(end + 4), stop, print);
}

std::optional<Result<HttpResponse>> call_faultd(const std::string& socket_path, const std::string& method,
                                                const std::string& target, uint64_t timeout_ns) {
  UniqueFd fd = connect_faultd(socket_path);
  if (!fd) return std::nullopt;
  return exchange(fd.get(), request_head(method, target, 0), monotonic_ns() + timeout_ns);
}

std::optional<CommandOutput> command_output(const HttpResponse& reply) {
  nlohmann::json j = nlohmann::json::parse(reply.body, nullptr, false);
  if (!j.is_object() || !j.contains("exit_code") || !j["exit_code"].is_number_integer() || !j.contains("output") ||
      !j["output"].is_string() || !j.contains("error") || !j["error"].is_string())
    return std::nullopt;
  return CommandOutput{j["exit_code"].get<int>(), j["output"].get<std::string>(), j["error"].get<std::string>()};
}

}  // namespace faultline
