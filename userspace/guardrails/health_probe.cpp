// A blocking GET with one overall deadline; the socket is made inside the namespace.
#include "userspace/guardrails/health_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/units.h"
#include "base/unique_fd.h"

namespace faultline {
namespace {


std::string ms(uint64_t ns) { return std::to_string(ns / 1'000'000) + "ms"; }

}  // namespace

Result<HealthProbe> HealthProbe::create(const HealthProbeConfig& cfg) {
  auto url = parse_http_url(cfg.url);
  if (!url) return make_error(url.error().err, "--health-url " + url.error().message);
  auto ns = resolve_netns(cfg.netns);
  if (!ns) return ns.error();
  return HealthProbe(cfg, *url, *ns);
}

GuardrailReading HealthProbe::check() const {
  GuardrailReading out;
  out.healthy = false;
  out.t_ns = boottime_ns();
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = start + cfg_.max_latency_ns;

  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port = std::to_string(url_.port);
  if (int rc = getaddrinfo(url_.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    out.problem = "cannot resolve " + url_.host + ": " + gai_strerror(rc);
    return out;
  }
  UniqueFd sock;
  {
    auto inside = NetnsEnter::enter(ns_);
    if (!inside) {
      freeaddrinfo(res);
      out.problem = inside.error().describe();
      return out;
    }
    sock.reset(::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  }
  if (!sock) {
    freeaddrinfo(res);
    out.problem = std::string("socket: ") + std::strerror(errno);
    return out;
  }
  int rc = ::connect(sock.get(), res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0 && errno != EINPROGRESS) {
    out.problem = std::string("connect: ") + std::strerror(errno);
    return out;
  }
  auto wait = [&](short events) -> bool {
    uint64_t now = monotonic_ns();
    if (now >= deadline) return false;
    pollfd p{sock.get(), events, 0};
    int left_ms = static_cast<int>((deadline - now + 999'999) / 1'000'000);
    return ::poll(&p, 1, left_ms) == 1;
  };
  if (!wait(POLLOUT)) {
    out.problem = "connect timed out after " + ms(cfg_.max_latency_ns);
    return out;
  }
  int soerr = 0;
  socklen_t len = sizeof(soerr);
  ::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &soerr, &len);
  if (soerr != 0) {
    out.problem = std::string("connect: ") + std::strerror(soerr);
    return out;
  }
  std::string req = "GET " + url_.path + " HTTP/1.1\r\nHost: " + url_.host + "\r\nUser-Agent: faultline-guardrail\r\nConnection: close\r\n\r\n";
  size_t sent = 0;
  while (sent < req.size()) {
    if (!wait(POLLOUT)) {
      out.problem = "request timed out after " + ms(cfg_.max_latency_ns);
      return out;
    }
    ssize_t n = ::send(sock.get(), req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) {
      out.problem = std::string("send: ") + std::strerror(errno);
      return out;
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string resp;
  char buf[1024];
  while (resp.find('\n') == std::string::npos && resp.size() < 8192) {
    if (!wait(POLLIN)) {
      out.problem = "no response within " + ms(cfg_.max_latency_ns);
      return out;
    }
    ssize_t n = ::recv(sock.get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0) {
      out.problem = n == 0 ? "connection closed before a response" : std::string("recv: ") + std::strerror(errno);
      return out;
    }
    resp.append(buf, static_cast<size_t>(n));
  }
  const uint64_t latency_ns = monotonic_ns() - start;
  out.values["latency_ms"] = static_cast<double>(latency_ns) / 1e6;
  auto status = parse_status_line(resp);
  if (!status) {
    out.problem = "bad response: " + status.error().message;
    return out;
  }
  out.values["status"] = status->code;
  if (status->code >= 400) {
    out.problem = "HTTP " + std::to_string(status->code);
    return out;
  }
  if (latency_ns > cfg_.max_latency_ns) {
    out.problem = "slow: " + ms(latency_ns) + " > " + ms(cfg_.max_latency_ns);
    return out;
  }
  out.healthy = true;
  return out;
}

nlohmann::json HealthProbe::describe() const {
  return {{"health_url", cfg_.url},
          {"max_latency", format_duration(cfg_.max_latency_ns)},
          {"interval", format_duration(cfg_.interval_ns)}};
}

nlohmann::json HealthProbe::event(const GuardrailReading& r) const {
  auto value = [&](const char* k) { return r.values.contains(k) ? r.values.at(k) : 0.0; };
  return {{"event", "probe"},
          {"healthy", r.healthy},
          {"latency_ms", value("latency_ms")},
          {"status", static_cast<int>(value("status"))},
          {"problem", r.problem}};
}

}  // namespace faultline
