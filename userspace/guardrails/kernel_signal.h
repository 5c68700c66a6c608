// The kernel-signal guardrail: TCP retransmits or resets per second in a
// namespace; no health endpoint needed. Counted by tracepoint programs (tp_btf)
// where they load, else from the namespace's /proc/net/snmp and
// /proc/net/netstat counters; the guardrail says which.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "base/result.h"
#include "loader/signals_object.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/guardrails/proc_net_counters.h"

namespace faultline {

// Where the counts come from (--signal-source).
enum class SignalSource {
  Auto,    // tp_btf, and procfs where the programs cannot load
  TpBtf,   // the tracepoint programs or nothing
  Procfs,  // the /proc/net counters, even where the programs would load
};
[[nodiscard]] std::optional<SignalSource> parse_signal_source(const std::string& s);  // "auto", "tp_btf", "procfs"
[[nodiscard]] const char* signal_source_name(SignalSource s);

struct KernelSignalConfig {
  std::string signal;      // "tcp_retransmits" or "tcp_resets"
  double abort_above = 0;  // per second
  uint64_t window_ns = 3'000'000'000ULL;
  uint32_t netns_ino = 0;  // the namespace whose sockets count
  std::string netns;       // the same namespace as named (--netns; empty: ours), for procfs
  SignalSource source = SignalSource::Auto;
};

[[nodiscard]] bool is_kernel_signal(const std::string& name);

// The /proc/net counters a signal is made of, as parse_proc_net_counters() names them.
//   tcp_retransmits: Tcp:RetransSegs (segments retransmitted).
//   tcp_resets: Tcp:OutRsts (resets sent), plus Tcp:EstabResets (established
//     connections reset) less TcpExt:TCPAbortOn{Data,Close,Memory,Timeout,Linger}
//     (the host's own aborts, which EstabResets counts too): resets received on
//     established connections. A reset answering a SYN is not in any counter.
[[nodiscard]] int64_t procfs_signal_total(const std::string& signal, const std::map<std::string, int64_t>& counters);

class KernelSignalGuardrail final : public Guardrail {
 public:
  explicit KernelSignalGuardrail(KernelSignalConfig cfg) : cfg_(std::move(cfg)) {}
  // Loads the programs (or opens the counters) and starts counting (what arm()
  // does), for callers that use the guardrail outside a run.
  [[nodiscard]] static Result<KernelSignalGuardrail> start(const KernelSignalConfig& cfg);

  // The rate over the window; unhealthy when it is above the limit. The
  // reading's value: "<signal>_per_s".
  [[nodiscard]] GuardrailReading sample();
  [[nodiscard]] double last_rate() const { return rate_; }
  [[nodiscard]] const KernelSignalConfig& config() const { return cfg_; }
  // "tp_btf" or "procfs" once armed; "auto" before.
  [[nodiscard]] std::string source() const;

  [[nodiscard]] std::string name() const override { return "kernel signal"; }
  // Read twice a second: a rate over a 3 s window moves slowly, and a read is
  // one map lookup per CPU (or two small /proc reads).
  [[nodiscard]] uint64_t interval_ns() const override { return 500'000'000ULL; }
  // A record keeps one reading a second.
  [[nodiscard]] uint64_t record_interval_ns() const override { return 1'000'000'000ULL; }
  [[nodiscard]] Status arm() override;
  [[nodiscard]] GuardrailReading read() override { return sample(); }
  [[nodiscard]] nlohmann::json describe() const override;
  [[nodiscard]] std::string summary() const override;
  [[nodiscard]] nlohmann::json event(const GuardrailReading& r) const override;

 private:
  [[nodiscard]] Status open_procfs();
  [[nodiscard]] Result<int64_t> total() const;
  KernelSignalConfig cfg_;
  std::optional<SignalsObject> obj_;
  std::optional<ProcNetCounters> procfs_;
  std::string fallback_why_;  // why tp_btf was passed over, with Auto
  std::string netns_display_ = "host";
  std::deque<std::pair<uint64_t, int64_t>> samples_;  // (monotonic ns, counter)
  double rate_ = 0;
  std::string read_error_;
};

}  // namespace faultline
