// A UDP socket inside host a that probes an fl-testhost udp-echo on host b, to
// tell when traffic passes and to time the instant it starts passing again.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "selftests/lib/child_process.h"
#include "selftests/lib/clock.h"

namespace fle2e {

using fltest::Millis;
using fltest::monotonic_ns;
using namespace std::chrono_literals;

// A socket of the given type, created by a helper thread that entered the namespace
// (a socket stays in the namespace it was made in). -1 with errno on failure.
[[nodiscard]] int socket_in_netns(const std::string& netns, int domain, int type);

class UdpProbe {
 public:
  // Throws std::runtime_error if the socket cannot be made.
  UdpProbe(const std::string& netns, const std::string& addr, uint16_t port);
  ~UdpProbe();
  UdpProbe(const UdpProbe&) = delete;
  UdpProbe& operator=(const UdpProbe&) = delete;

  // Sends a probe every 2 ms for up to `window`; true at the first answer.
  [[nodiscard]] bool reachable(Millis window);

  // Probes every `every` until one is answered or deadline (CLOCK_MONOTONIC ns)
  // passes. Returns the send time of the first answered probe: the moment traffic
  // passed again, to within `every` (an upper bound: taken as send() returned). on_tick runs between probes (e.g. to
  // note when another process exits).
  [[nodiscard]] std::optional<uint64_t> first_answer(uint64_t deadline_ns, Millis every = 1ms,
                                                     const std::function<void()>& on_tick = {});

 private:
  void drain();
  static constexpr uint64_t kMagic = 0x666c7072U;
  int fd_ = -1;
  uint64_t next_seq_ = 0;
  std::vector<uint64_t> sent_at_;  // by probe number: when its send() had returned
  std::string target_;
};

}  // namespace fle2e
