#include "userspace/guardrails/guardrail_options.h"

namespace faultline {

Result<Guardrails> make_guardrails(const GuardrailOptions& opts, uint32_t netns_ino) {
  Guardrails gs;
  if (opts.health) {
    auto p = HealthProbe::create(*opts.health);
    if (!p) return as_bad_input(p.error());
    gs.push_back(std::make_unique<HealthProbe>(std::move(*p)));
  }
  if (opts.kernel_signal) {
    KernelSignalConfig cfg = *opts.kernel_signal;
    cfg.netns_ino = netns_ino;
    gs.push_back(std::make_unique<KernelSignalGuardrail>(cfg));
  }
  return gs;
}

}  // namespace faultline
