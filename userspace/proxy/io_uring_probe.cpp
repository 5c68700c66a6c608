// The io_uring probe: the relay's options come from trying them on this kernel.
#include "userspace/proxy/io_uring_probe.h"

#include <liburing.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <cerrno>
#include <optional>
#include <thread>

#include "base/unique_fd.h"

namespace faultline {

namespace {
Result<UringSupport> probe_on_this_thread() {
  io_uring ring{};
  if (int rc = io_uring_queue_init(8, &ring, 0); rc < 0) return make_error(-rc, "io_uring_queue_init");
  UringSupport s;
  // A provided buffer ring (5.19): register a one-page ring and take it back.
  void* mem = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (mem != MAP_FAILED) {
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(mem);
    reg.ring_entries = 8;
    reg.bgid = 7;
    if (io_uring_register_buf_ring(&ring, &reg, 0) == 0) {
      s.buffer_ring = true;
      (void)io_uring_unregister_buf_ring(&ring, 7);
    }
    ::munmap(mem, 4096);
  }
  // Multishot accept (5.19): arm one on a throwaway listener, then cancel it. An
  // older kernel fails the accept with EINVAL; a newer one reports it cancelled.
  UniqueFd lfd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in lo{};
  lo.sin_family = AF_INET;
  lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (lfd && ::bind(lfd.get(), reinterpret_cast<sockaddr*>(&lo), sizeof lo) == 0 && ::listen(lfd.get(), 1) == 0) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_multishot_accept(sqe, lfd.get(), nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, 1);
    sqe = io_uring_get_sqe(&ring);
    io_uring_prep_cancel64(sqe, 1, 0);
    io_uring_sqe_set_data64(sqe, 2);
    (void)io_uring_submit(&ring);
    for (int seen = 0; seen < 2;) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe(&ring, &cqe) != 0) break;
      if (cqe->user_data == 1 && !(cqe->flags & IORING_CQE_F_MORE)) {
        s.multishot_accept = cqe->res == -ECANCELED;
        ++seen;
      } else if (cqe->user_data == 2) {
        ++seen;
      }
      io_uring_cqe_seen(&ring, cqe);
    }
  }
  io_uring_queue_exit(&ring);
  return s;
}
}  // namespace

// On a thread of its own: the kernel tears a ring down asynchronously and then
// queues work on every task that used it (TWA_SIGNAL), which makes a blocking
// call of that task with a timeout (SO_RCVTIMEO) fail with EINTR. A thread that
// has exited is past caring.
Result<UringSupport> probe_io_uring() {
  std::optional<Result<UringSupport>> result;
  std::thread([&] { result.emplace(probe_on_this_thread()); }).join();
  return std::move(*result);
}

}  // namespace faultline
