// Loads signals.bpf.c for the length of a run and turns its counters into a rate.
#include "userspace/guardrails/kernel_signal.h"

#include <bpf/bpf.h>
#include <time.h>

#include <sstream>
#include <vector>

#include "faultline/signals_abi.h"
#include "signals.skel.h"

namespace faultline {
namespace {

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

bool is_kernel_signal(const std::string& name) { return name == "tcp_retransmits" || name == "tcp_resets"; }

void KernelSignalGuard::Destroy::operator()(fl_signals* s) const { fl_signals__destroy(s); }

Result<KernelSignalGuard> KernelSignalGuard::start(const KernelSignalConfig& cfg) {
  fl_signals* skel = fl_signals__open_and_load();
  if (skel == nullptr)
    return errno_error("--kernel-signal " + cfg.signal + ": cannot load the tracepoint programs (needs tp_btf)");
  KernelSignalGuard g(cfg, skel);
  if (fl_signals__attach(skel) != 0) return errno_error("--kernel-signal " + cfg.signal + ": cannot attach the TCP tracepoints");
  g.samples_.emplace_back(mono_ns(), g.total());
  return g;
}

KernelSignalGuard::~KernelSignalGuard() = default;

uint64_t KernelSignalGuard::total() const {
  std::vector<fl_sig_counts> per(static_cast<size_t>(libbpf_num_possible_cpus()));
  uint32_t key = cfg_.netns_ino;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.fl_sig_ns), &key, per.data()) != 0) return 0;
  uint64_t sum = 0;
  for (const auto& c : per) sum += cfg_.signal == "tcp_resets" ? c.resets_sent + c.resets_received : c.retransmits;
  return sum;
}

ProbeOutcome KernelSignalGuard::sample() {
  uint64_t now = mono_ns();
  samples_.emplace_back(now, total());
  while (samples_.size() > 2 && now - samples_[1].first >= cfg_.window_ns) samples_.pop_front();
  const auto& first = samples_.front();
  double secs = static_cast<double>(now - first.first) / 1e9;
  rate_ = secs > 0 ? static_cast<double>(samples_.back().second - first.second) / secs : 0;
  ProbeOutcome o;
  o.healthy = rate_ <= cfg_.abort_above;
  if (!o.healthy) {
    std::ostringstream s;
    s.precision(1);
    s << std::fixed << cfg_.signal << " at " << rate_ << "/s over the last " << secs << "s, above " << cfg_.abort_above
      << "/s";
    o.problem = s.str();
  }
  return o;
}

}  // namespace faultline
