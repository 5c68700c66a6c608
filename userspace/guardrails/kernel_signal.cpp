// Turns a namespace's retransmit or reset counter (the signals object's, or
// /proc/net's) into a rate over a window.
#include "userspace/guardrails/kernel_signal.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/clock.h"
#include "base/units.h"

namespace faultline {
namespace {

const char* procfs_counters(const std::string& signal) {
  return signal == "tcp_resets" ? "Tcp:OutRsts + Tcp:EstabResets - TcpExt:TCPAbortOn*" : "Tcp:RetransSegs";
}

}  // namespace

bool is_kernel_signal(const std::string& name) { return name == "tcp_retransmits" || name == "tcp_resets"; }

std::optional<SignalSource> parse_signal_source(const std::string& s) {
  if (s == "auto") return SignalSource::Auto;
  if (s == "tp_btf") return SignalSource::TpBtf;
  if (s == "procfs") return SignalSource::Procfs;
  return std::nullopt;
}

const char* signal_source_name(SignalSource s) {
  switch (s) {
    case SignalSource::Auto:
      return "auto";
    case SignalSource::TpBtf:
      return "tp_btf";
    case SignalSource::Procfs:
      return "procfs";
  }
  return "auto";
}

int64_t procfs_signal_total(const std::string& signal, const std::map<std::string, int64_t>& c) {
  auto at = [&](const char* k) {
    auto it = c.find(k);
    return it == c.end() ? int64_t{0} : it->second;
  };
  if (signal != "tcp_resets") return at("Tcp:RetransSegs");
  int64_t own_aborts = 0;
  for (const char* k : {"TcpExt:TCPAbortOnData", "TcpExt:TCPAbortOnClose", "TcpExt:TCPAbortOnMemory",
                        "TcpExt:TCPAbortOnTimeout", "TcpExt:TCPAbortOnLinger"})
    own_aborts += at(k);
  return at("Tcp:OutRsts") + at("Tcp:EstabResets") - own_aborts;
}

Result<KernelSignalGuardrail> KernelSignalGuardrail::start(const KernelSignalConfig& cfg) {
  KernelSignalGuardrail g(cfg);
  FL_TRY(g.arm());
  return g;
}

std::string KernelSignalGuardrail::source() const {
  if (obj_) return "tp_btf";
  if (procfs_) return "procfs";
  return signal_source_name(cfg_.source);
}

Status KernelSignalGuardrail::open_procfs() {
  auto ns = resolve_netns(cfg_.netns);
  if (!ns) return ns.error();
  if (cfg_.netns_ino != 0 && ns->inode != cfg_.netns_ino)
    return make_error(EINVAL, "--kernel-signal: namespace " + ns->display + " is not the fault's (inode " +
                                  std::to_string(ns->inode) + ", the fault's " + std::to_string(cfg_.netns_ino) + ")");
  auto counters = ProcNetCounters::open(*ns);
  if (!counters)
    return make_error(counters.error().err, "--kernel-signal " + cfg_.signal + ": " + counters.error().message);
  procfs_.emplace(std::move(*counters));
  netns_display_ = ns->display;
  return {};
}

Status KernelSignalGuardrail::arm() {
  if (obj_ || procfs_) return {};
  if (cfg_.source != SignalSource::Procfs) {
    auto obj = SignalsObject::start();
    if (obj) {
      obj_.emplace(std::move(*obj));
    } else if (cfg_.source == SignalSource::TpBtf) {
      return make_error(obj.error().err, "--kernel-signal " + cfg_.signal +
                                             ": cannot load the tracepoint programs (needs tp_btf): " +
                                             obj.error().message + "; --signal-source procfs counts from /proc/net");
    } else {
      fallback_why_ = "the tracepoint programs cannot load: " + obj.error().describe();
    }
  }
  if (!obj_) FL_TRY(open_procfs());
  samples_.clear();
  auto t = total();
  if (!t) return t.error();
  samples_.emplace_back(monotonic_ns(), *t);
  return {};
}

Result<int64_t> KernelSignalGuardrail::total() const {
  if (obj_) {
    fl_sig_counts c = obj_->counts(cfg_.netns_ino);
    return static_cast<int64_t>(cfg_.signal == "tcp_resets" ? c.resets_sent + c.resets_received : c.retransmits);
  }
  if (procfs_) {
    auto c = procfs_->read();
    if (!c) return c.error();
    return procfs_signal_total(cfg_.signal, *c);
  }
  return int64_t{0};
}

GuardrailReading KernelSignalGuardrail::sample() {
  GuardrailReading r;
  r.t_ns = boottime_ns();
  uint64_t now = monotonic_ns();
  auto t = total();
  if (!t) {
    // A guardrail that cannot count is blind, not healthy.
    r.healthy = false;
    r.problem = cfg_.signal + " cannot be read: " + t.error().describe();
    return r;
  }
  samples_.emplace_back(now, *t);
  while (samples_.size() > 2 && now - samples_[1].first >= cfg_.window_ns) samples_.pop_front();
  const auto& first = samples_.front();
  double secs = static_cast<double>(now - first.first) / 1e9;
  // The procfs reset count subtracts the host's own aborts, so a window may come out below zero.
  int64_t delta = std::max<int64_t>(0, samples_.back().second - first.second);
  rate_ = secs > 0 ? static_cast<double>(delta) / secs : 0;
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
  nlohmann::json k{{"signal", cfg_.signal},
                   {"abort_above_per_s", cfg_.abort_above},
                   {"window", format_duration(cfg_.window_ns)},
                   {"source", source()}};
  if (procfs_) {
    k["counters"] = procfs_counters(cfg_.signal);
    k["netns"] = netns_display_;
  }
  if (!fallback_why_.empty()) k["fallback"] = fallback_why_;
  return {{"kernel_signal", k}};
}

std::string KernelSignalGuardrail::summary() const {
  std::ostringstream s;
  s << cfg_.signal << " per second over " << format_duration(cfg_.window_ns) << ", abort above " << cfg_.abort_above
    << "/s, counted ";
  if (obj_) {
    s << "by tracepoint programs (tp_btf)";
  } else if (procfs_) {
    s << "from /proc/net/snmp and /proc/net/netstat of namespace " << netns_display_ << " ("
      << procfs_counters(cfg_.signal) << ")";
    if (!fallback_why_.empty()) s << ": " << fallback_why_;
  } else {
    s << "by tracepoint programs, else from /proc/net";
  }
  return s.str();
}

nlohmann::json KernelSignalGuardrail::event(const GuardrailReading&) const {
  return {{"event", "kernel_signal"}, {"signal", cfg_.signal}, {"rate_per_s", rate_}, {"source", source()}};
}

}  // namespace faultline
