// The kernel-signal guardrail: TCP retransmits or resets per second in a namespace,
// counted by tracepoint programs; no health endpoint needed.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "base/result.h"
#include "loader/signals_object.h"
#include "userspace/guardrails/guardrail.h"

namespace faultline {

struct KernelSignalConfig {
  std::string signal;        // "tcp_retransmits" or "tcp_resets"
  double abort_above = 0;    // per second
  uint64_t window_ns = 3'000'000'000ULL;
  uint32_t netns_ino = 0;    // the namespace whose sockets count
};

[[nodiscard]] bool is_kernel_signal(const std::string& name);

class KernelSignalGuardrail final : public Guardrail {
 public:
  explicit KernelSignalGuardrail(KernelSignalConfig cfg) : cfg_(std::move(cfg)) {}
  // Loads the programs and starts counting (what arm() does), for callers that
  // use the guardrail outside a run.
  [[nodiscard]] static Result<KernelSignalGuardrail> start(const KernelSignalConfig& cfg);

  // The rate over the window; unhealthy when it is above the limit. The
  // reading's value: "<signal>_per_s".
  [[nodiscard]] GuardrailReading sample();
  [[nodiscard]] double last_rate() const { return rate_; }
  [[nodiscard]] const KernelSignalConfig& config() const { return cfg_; }

  [[nodiscard]] std::string name() const override { return "kernel signal"; }
  // Read twice a second: a rate over a 3 s window moves slowly, and a read is
  // one map lookup per CPU.
  [[nodiscard]] uint64_t interval_ns() const override { return 500'000'000ULL; }
  // A record keeps one reading a second.
  [[nodiscard]] uint64_t record_interval_ns() const override { return 1'000'000'000ULL; }
  [[nodiscard]] Status arm() override;
  [[nodiscard]] GuardrailReading read() override { return sample(); }
  [[nodiscard]] nlohmann::json describe() const override;
  [[nodiscard]] nlohmann::json event(const GuardrailReading& r) const override;

 private:
  [[nodiscard]] uint64_t total() const;
  KernelSignalConfig cfg_;
  std::optional<SignalsObject> obj_;
  std::deque<std::pair<uint64_t, uint64_t>> samples_;  // (monotonic ns, counter)
  double rate_ = 0;
};

}  // namespace faultline
