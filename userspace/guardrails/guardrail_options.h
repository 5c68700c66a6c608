// The guardrails an operator asked for (the flags every `faultctl run` shares),
// turned into guardrails for one run.
#pragma once

#include <cstdint>
#include <optional>

#include "base/result.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/guardrails/health_probe.h"
#include "userspace/guardrails/kernel_signal.h"

namespace faultline {

struct GuardrailOptions {
  std::optional<HealthProbeConfig> health;          // --health-url, --health-ca, --health-max-latency, --interval
  std::optional<KernelSignalConfig> kernel_signal;  // --kernel-signal, --abort-above, --signal-window, --signal-source

  [[nodiscard]] bool any() const { return health || kernel_signal; }
};

// The guardrails, not yet armed. netns_ino is the namespace the fault touches,
// where the kernel signal counts. A health URL that cannot be probed is bad input.
[[nodiscard]] Result<Guardrails> make_guardrails(const GuardrailOptions& opts, uint32_t netns_ino);

}  // namespace faultline
