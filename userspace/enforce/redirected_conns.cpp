#include "userspace/enforce/redirected_conns.h"

#include <bpf/bpf.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/unique_fd.h"
#include "userspace/state/session_registry.h"

namespace faultline {

Result<std::optional<RedirectedConn>> find_redirected_conn(int accepted_fd) {
  sockaddr_storage peer{}, local{};
  socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
  if (::getpeername(accepted_fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
    return errno_error("getpeername of the accepted connection");
  if (::getsockname(accepted_fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0)
    return errno_error("getsockname of the accepted connection");
  auto registry = SessionRegistry::open(false);
  if (!registry) {
    if (registry.error().err == ENOENT) return std::optional<RedirectedConn>{};  // no state folder: no guard runs
    return registry.error();
  }
  for (const Session& s : registry->list()) {
    if (s.kind != "guard" || s.pin_dir.empty() || s.released) continue;
    const std::string pin = s.pin_dir + "/" + kRedirectedConnsPin;
    UniqueFd map(bpf_obj_get(pin.c_str()));
    if (!map) {
      if (errno == ENOENT) continue;  // a guard without --redirect
      return errno_error("cannot open " + pin);
    }
    auto got = take_redirected_conn(map.get(), reinterpret_cast<const sockaddr*>(&peer),
                                    reinterpret_cast<const sockaddr*>(&local));
    if (!got || *got) return got;
  }
  return std::optional<RedirectedConn>{};
}

}  // namespace faultline
