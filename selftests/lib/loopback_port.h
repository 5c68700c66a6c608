// A TCP port free on 127.0.0.1 now, for a server a test starts (PostgreSQL,
// faultcp): the kernel picks it for a socket that is closed at once. Another
// process may take it before the server binds; tests bind soon after.
#pragma once

#include <cstdint>

namespace fltest {

// The port, or throws std::runtime_error when no socket could be bound.
[[nodiscard]] uint16_t free_loopback_port();

// A TCP socket connected to 127.0.0.1:port (blocking, close-on-exec), or -1.
[[nodiscard]] int connect_loopback(uint16_t port);

}  // namespace fltest
