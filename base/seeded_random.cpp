// draw_seed(): 64 bits from the kernel's CSPRNG.
#include "base/seeded_random.h"

#include <sys/random.h>

#include <cerrno>
#include <ctime>

namespace faultline {

uint64_t draw_seed() {
  uint64_t seed = 0;
  for (;;) {
    ssize_t n = ::getrandom(&seed, sizeof(seed), 0);
    if (n == static_cast<ssize_t>(sizeof(seed))) return seed;
    if (n < 0 && errno == EINTR) continue;
    // getrandom cannot fail past early boot; the clock is still a seed that is
    // printed and recorded, which is all a replay needs.
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return splitmix64(static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec));
  }
}

}  // namespace faultline
