// The guardrails an operator asked for (the flags every `faultctl run` shares),
// turned into guardrails for one run.
#pragma once

#include <cstdint>
#include <optional>

#include "base/result.h"
#include "userspace/guardrails/burn_rate.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/guardrails/health_probe.h"
#include "userspace/guardrails/kernel_signal.h"
#include "userspace/guardrails/prometheus_guardrail.h"

namespace faultline {

struct GuardrailOptions {
  std::optional<HealthProbeConfig> health;          // --health-url, --health-ca, --health-max-latency, --interval
  std::optional<KernelSignalConfig> kernel_signal;  // --kernel-signal, --abort-above, --signal-window, --signal-source
  std::optional<PrometheusGuardrailConfig> prometheus;  // --prometheus-url, --query, --abort-above/-below, ...
  std::optional<BurnRateConfig> burn_rate;              // --prometheus-url, --slo-burn-rate, --abort-above, ...

  [[nodiscard]] bool any() const { return health || kernel_signal || prometheus || burn_rate; }
  // The shortest interval a record reads them all at (1 s with the kernel signal alone).
  [[nodiscard]] uint64_t record_interval_ns() const;
};

// The guardrails, not yet armed. netns_ino is the namespace the fault touches,
// where the kernel signal counts. A health URL that cannot be probed is bad input.
[[nodiscard]] Result<Guardrails> make_guardrails(const GuardrailOptions& opts, uint32_t netns_ino);

}  // namespace faultline
