// The kernel-signal guardrail: TCP retransmits or resets per second in a namespace,
// counted by tracepoint programs; no health endpoint needed.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "loader/bpf_link.h"
#include "loader/result.h"
#include "userspace/guardrails/health_probe.h"

struct fl_signals;

namespace faultline {

struct KernelSignalConfig {
  std::string signal;        // "tcp_retransmits" or "tcp_resets"
  double abort_above = 0;    // per second
  uint64_t window_ns = 3'000'000'000ULL;
  uint32_t netns_ino = 0;    // the namespace whose sockets count
};

[[nodiscard]] bool is_kernel_signal(const std::string& name);

class KernelSignalGuard {
 public:
  [[nodiscard]] static Result<KernelSignalGuard> start(const KernelSignalConfig& cfg);
  KernelSignalGuard(KernelSignalGuard&&) noexcept = default;
  ~KernelSignalGuard();

  // Reads the counter; unhealthy when the rate over the window is above the limit.
  [[nodiscard]] ProbeOutcome sample();
  [[nodiscard]] double last_rate() const { return rate_; }
  [[nodiscard]] const KernelSignalConfig& config() const { return cfg_; }

 private:
  struct Destroy {
    void operator()(fl_signals* s) const;
  };
  KernelSignalGuard(KernelSignalConfig cfg, fl_signals* s) : cfg_(std::move(cfg)), skel_(s) {}
  [[nodiscard]] uint64_t total() const;
  KernelSignalConfig cfg_;
  std::unique_ptr<fl_signals, Destroy> skel_;
  std::deque<std::pair<uint64_t, uint64_t>> samples_;  // (monotonic ns, counter)
  double rate_ = 0;
};

}  // namespace faultline
