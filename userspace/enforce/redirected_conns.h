// The proxy's side of a redirect: where the client of a connection it accepted
// asked to go. A guard with --redirect files each redirected TCP connection in
// the kernel (fl_sockops, at connect time) under (client, target), in a map it
// pins beside its links; the proxy looks the accepted socket up there. Never a
// guess: a connection that no guard redirected has no answer.
#pragma once

#include <optional>

#include "base/result.h"
#include "loader/sockaddr_object.h"

namespace faultline {

// Looks the accepted socket (its peer and local address) up in the connection
// map of every live guard that redirects, and takes the entry. An accepted
// connection is filed in at most one map: its client socket belongs to one cgroup.
[[nodiscard]] Result<std::optional<RedirectedConn>> find_redirected_conn(int accepted_fd);

}  // namespace faultline
