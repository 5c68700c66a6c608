#include "userspace/guardrails/guardrail_options.h"

#include <algorithm>

namespace faultline {

uint64_t GuardrailOptions::record_interval_ns() const {
  uint64_t i = UINT64_MAX;
  if (health) i = std::min(i, health->interval_ns);
  if (prometheus) i = std::min(i, prometheus->polling.interval_ns);
  if (burn_rate) i = std::min(i, burn_rate->polling.interval_ns);
  if (kernel_signal) i = std::min<uint64_t>(i, 1'000'000'000ULL);
  return i == UINT64_MAX ? 1'000'000'000ULL : i;
}

Result<Guardrails> make_guardrails(const GuardrailOptions& opts, uint32_t netns_ino) {
  Guardrails gs;
  if (opts.health) {
    auto p = HealthProbe::create(*opts.health);
    if (!p) return as_bad_input(p.error());
    gs.push_back(std::make_unique<HealthProbe>(std::move(*p)));
  }
  if (opts.prometheus) {
    auto p = PrometheusGuardrail::create(*opts.prometheus);
    if (!p) return as_bad_input(p.error());
    gs.push_back(std::make_unique<PrometheusGuardrail>(std::move(*p)));
  }
  if (opts.burn_rate) {
    auto b = BurnRateGuardrail::create(*opts.burn_rate);
    if (!b) return as_bad_input(b.error());
    gs.push_back(std::make_unique<BurnRateGuardrail>(std::move(*b)));
  }
  if (opts.kernel_signal) {
    KernelSignalConfig cfg = *opts.kernel_signal;
    cfg.netns_ino = netns_ino;
    gs.push_back(std::make_unique<KernelSignalGuardrail>(cfg));
  }
  return gs;
}

}  // namespace faultline
