// Endpoint parsing and the shared listeners of a proxy.
#include "userspace/proxy/endpoint.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace faultline {

Result<HostPort> split_endpoint(const std::string& text, const std::string& what) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size())
    return input_error(EINVAL, what + ": \"" + text + "\" is not host:port");
  std::string host = text.substr(0, colon);
  std::string port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port_num = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || port_num < 0 || port_num > 65535)
    return input_error(EINVAL, what + ": bad port \"" + port + "\" in \"" + text + "\"");
  if (host.empty()) host = "0.0.0.0";
  return HostPort{host, uint16_t(port_num)};
}

std::optional<SocketAddress> numeric_socket_address(const std::string& host, uint16_t port) {
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.length = sizeof(sockaddr_in);
    return a;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.length = sizeof(sockaddr_in6);
    return a;
  }
  return std::nullopt;
}

Result<SocketAddress> resolve_endpoint(const std::string& text, const std::string& what) {
  auto hp = split_endpoint(text, what);
  if (!hp) return hp.error();
  const std::string& host = hp->host;
  const std::string port = std::to_string(hp->port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return input_error(EINVAL, what + ": cannot resolve \"" + host + "\": " + ::gai_strerror(rc));
  SocketAddress a;
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.length = res->ai_addrlen;
  ::freeaddrinfo(res);
  return a;
}

std::string endpoint_text(const SocketAddress& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a.storage);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
  return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
}

SocketAddress socket_address(const uint8_t (&addr16)[16], uint16_t port) {
  SocketAddress out;
  in6_addr a6;
  std::memcpy(&a6, addr16, sizeof a6);
  if (IN6_IS_ADDR_V4MAPPED(&a6)) {
    auto* in = reinterpret_cast<sockaddr_in*>(&out.storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    std::memcpy(&in->sin_addr, addr16 + 12, 4);
    out.length = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    in6->sin6_addr = a6;
    out.length = sizeof(sockaddr_in6);
  }
  return out;
}

Result<SocketAddress> local_address(int fd) {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) return errno_error("getsockname");
  return a;
}

Result<std::vector<UniqueFd>> reuseport_listeners(const SocketAddress& at, unsigned count) {
  std::vector<UniqueFd> fds;
  SocketAddress bind_to = at;
  for (unsigned i = 0; i < count; ++i) {
    UniqueFd fd(::socket(at.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return errno_error("socket");
    int one = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
      return errno_error("setsockopt SO_REUSEPORT");
    if (::bind(fd.get(), bind_to.get(), bind_to.length) != 0) return errno_error("bind " + endpoint_text(bind_to));
    if (::listen(fd.get(), 4096) != 0) return errno_error("listen " + endpoint_text(bind_to));
    // Port 0: the first bind picked the port; the others join it.
    if (i == 0) {
      auto bound = local_address(fd.get());
      if (!bound) return bound.error();
      bind_to = *bound;
    }
    fds.push_back(std::move(fd));
  }
  return fds;
}

}  // namespace faultline
