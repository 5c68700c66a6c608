// Turns the signals object's per-namespace counters into a rate over a window.
#include "userspace/guardrails/kernel_signal.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/clock.h"

namespace faultline {

bool is_kernel_signal(const std::string& name) { return name == "tcp_retransmits" || name == "tcp_resets"; }

Result<KernelSignalGuardrail> KernelSignalGuardrail::start(const KernelSignalConfig& cfg) {
  KernelSignalGuardrail g(cfg);
  FL_TRY(g.arm());
  return g;
}

Status KernelSignalGuardrail::arm() {
  if (obj_) return {};
  auto obj = SignalsObject::start();
  if (!obj)
    return make_error(obj.error().err, "--kernel-signal " + cfg_.signal +
                                           ": cannot load the tracepoint programs (needs tp_btf): " +
                                           obj.error().message);
  obj_.emplace(std::move(*obj));
  samples_.clear();
  samples_.emplace_back(monotonic_ns(), total());
  return {};
}

uint64_t KernelSignalGuardrail::total() const {
  if (!obj_) return 0;
  fl_sig_counts c = obj_->counts(cfg_.netns_ino);
  return cfg_.signal == "tcp_resets" ? c.resets_sent + c.resets_received : c.retransmits;
}

GuardrailReading KernelSignalGuardrail::sample() {
  uint64_t now = monotonic_ns();
  samples_.emplace_back(now, total());
  while (samples_.size() > 2 && now - samples_[1].first >= cfg_.window_ns) samples_.pop_front();
  const auto& first = samples_.front();
  double secs = static_cast<double>(now - first.first) / 1e9;
  rate_ = secs > 0 ? static_cast<double>(samples_.back().second - first.second) / secs : 0;
  GuardrailReading r;
  r.t_ns = boottime_ns();
  r.values[cfg_.signal + "_per_s"] = rate_;
  r.healthy = rate_ <= cfg_.abort_above;
  if (!r.healthy) {
    std::ostringstream s;
    s.precision(1);
    s << std::fixed << cfg_.signal << " at " << rate_ << "/s over the last " << secs << "s, above " << cfg_.abort_above
      << "/s";
    r.problem = s.str();
  }
  return r;
}

nlohmann::json KernelSignalGuardrail::describe() const {
  return {{"kernel_signal", {{"signal", cfg_.signal}, {"abort_above_per_s", cfg_.abort_above}}}};
}

nlohmann::json KernelSignalGuardrail::event(const GuardrailReading&) const {
  return {{"event", "kernel_signal"}, {"signal", cfg_.signal}, {"rate_per_s", rate_}};
}

}  // namespace faultline
