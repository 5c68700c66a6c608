// "host:port" text to socket addresses and back, and the SO_REUSEPORT listeners
// a proxy's workers share.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  [[nodiscard]] const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  [[nodiscard]] int family() const { return storage.ss_family; }
};

// "host:port", "[v6]:port" or ":port" split without resolving anything: the
// host unbracketed ("0.0.0.0" when empty) and the port. Bad input names `what`.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
[[nodiscard]] Result<HostPort> split_endpoint(const std::string& text, const std::string& what);

// A numeric host (IPv4, IPv6 without brackets) as an address; nothing for a name.
[[nodiscard]] std::optional<SocketAddress> numeric_socket_address(const std::string& host, uint16_t port);

// Resolves "host:port", "[v6]:port" or ":port" (every IPv4 address). The host is
// numeric or a name (getaddrinfo; the first TCP address wins). Bad input names `what`.
[[nodiscard]] Result<SocketAddress> resolve_endpoint(const std::string& text, const std::string& what);

// "127.0.0.1:80", "[::1]:80".
[[nodiscard]] std::string endpoint_text(const SocketAddress& a);

// `count` listening sockets on one address and port, in one SO_REUSEPORT group (the
// kernel spreads connections over them); port 0 is picked once for all of them.
[[nodiscard]] Result<std::vector<UniqueFd>> reuseport_listeners(const SocketAddress& at, unsigned count);

// An address in the kernel's 16-byte form (IPv4 as v4-mapped IPv6, as the BPF
// maps file it) and a port in host order, as a socket address: AF_INET for a
// v4-mapped address, AF_INET6 otherwise.
[[nodiscard]] SocketAddress socket_address(const uint8_t (&addr16)[16], uint16_t port);

// The address a socket is bound to.
[[nodiscard]] Result<SocketAddress> local_address(int fd);

}  // namespace faultline
