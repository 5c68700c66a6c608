// What io_uring on the running kernel offers the relay, found by trying it.
#pragma once

#include "base/result.h"

namespace faultline {

struct UringSupport {
  bool buffer_ring = false;       // IORING_REGISTER_PBUF_RING (5.19)
  bool multishot_accept = false;  // IORING_ACCEPT_MULTISHOT (5.19)
};

// Registers a buffer ring, arms and cancels a multishot accept on a throwaway
// loopback listener; fails only when io_uring itself is unavailable.
[[nodiscard]] Result<UringSupport> probe_io_uring();

}  // namespace faultline
