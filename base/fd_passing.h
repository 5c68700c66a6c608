// A file descriptor across a unix socket (SCM_RIGHTS): a seccomp filter's
// notify fd is made in a child, before exec, and handed to its parent.
#pragma once

namespace faultline {

// Sends fd over the connected unix socket sock; false if it could not.
[[nodiscard]] bool send_fd(int sock, int fd);
// The fd sent over sock, or -1 (the peer closed, or sent none).
[[nodiscard]] int recv_fd(int sock);

}  // namespace faultline
