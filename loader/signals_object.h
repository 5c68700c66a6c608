// The signals BPF object (signals.bpf.c): TCP retransmits and resets counted per
// network namespace by tracepoint programs, for the kernel-signal guardrail. One
// private instance per run, never pinned.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "faultline/signals_abi.h"
#include "loader/bpf_skeleton.h"

struct fl_signals;  // the bpftool skeleton

namespace faultline {

class SignalsObject {
 public:
  // Loads and attaches the tracepoint programs (tp_btf): counting starts here.
  [[nodiscard]] static Result<SignalsObject> start();
  SignalsObject(SignalsObject&&) noexcept;
  SignalsObject& operator=(SignalsObject&&) noexcept;
  ~SignalsObject();

  // The counts of one namespace (its inode number), summed over CPUs; zero
  // before its first event.
  [[nodiscard]] fl_sig_counts counts(uint32_t netns_ino) const;

 private:
  explicit SignalsObject(BpfSkeleton<fl_signals> skel);
  BpfSkeleton<fl_signals> skel_;
};

}  // namespace faultline
