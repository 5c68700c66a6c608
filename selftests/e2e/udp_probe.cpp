// Probes carry their own send time, so an answer says when the path was open.
#include "udp_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace fle2e {

int socket_in_netns(const std::string& netns, int domain, int type) {
  int fd = -1, err = 0;
  std::thread t([&] {
    int ns = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
      err = errno;
      if (ns >= 0) ::close(ns);
      return;
    }
    ::close(ns);
    fd = ::socket(domain, type | SOCK_CLOEXEC, 0);
    err = errno;
  });
  t.join();
  if (fd < 0) errno = err;
  return fd;
}

UdpProbe::UdpProbe(const std::string& netns, const std::string& addr, uint16_t port) : target_(addr) {
  fd_ = socket_in_netns(netns, AF_INET, SOCK_DGRAM);
  if (fd_ < 0) throw std::runtime_error("probe socket in " + netns + ": " + std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
    throw std::runtime_error("probe connect to " + addr + ": " + std::strerror(errno));
}

UdpProbe::~UdpProbe() {
  if (fd_ >= 0) ::close(fd_);
}

void UdpProbe::drain() {
  uint64_t buf[2];
  while (::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT) >= 0 || errno == ECONNREFUSED) {
  }
}

std::optional<uint64_t> UdpProbe::first_answer(uint64_t deadline_ns, Millis every,
                                               const std::function<void()>& on_tick) {
  drain();
  // Probes are numbered; each number's time is taken right after send() returns.
  // On a veth the egress hook runs inside that send(), so the probe met the fault
  // (or its absence) no later than the recorded time, however the scheduler
  // delays this thread around the call.
  const uint64_t first = next_seq_;
  const uint64_t gap = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(every).count());
  uint64_t next = monotonic_ns();
  for (;;) {
    uint64_t now = monotonic_ns();
    if (now >= next) {
      if (now >= deadline_ns) return std::nullopt;
      uint64_t msg[2] = {next_seq_++, kMagic};
      (void)::send(fd_, msg, sizeof(msg), MSG_DONTWAIT);  // ENOBUFS would be a visible local drop: keep probing
      sent_at_.push_back(monotonic_ns());
      next = now + gap;
    }
    if (on_tick) on_tick();
    pollfd p{fd_, POLLIN, 0};
    uint64_t t = monotonic_ns();
    uint64_t wait = next > t ? next - t : 0;
    timespec ts{static_cast<time_t>(wait / 1'000'000'000ULL), static_cast<long>(wait % 1'000'000'000ULL)};
    if (::ppoll(&p, 1, &ts, nullptr) != 1) continue;
    uint64_t got[2];
    while (::recv(fd_, got, sizeof(got), MSG_DONTWAIT) == static_cast<ssize_t>(sizeof(got))) {
      if (got[1] == kMagic && got[0] >= first && got[0] < next_seq_) return sent_at_[got[0]];
    }
  }
}

bool UdpProbe::reachable(Millis window) {
  const uint64_t deadline =
      monotonic_ns() + static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(window).count());
  return first_answer(deadline, 2ms).has_value();
}

}  // namespace fle2e
