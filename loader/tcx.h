// The TCX attach types (Linux 6.6), spelled out once: the UAPI headers of a
// Debian 12 build host predate BPF_TCX_INGRESS and BPF_TCX_EGRESS.
#pragma once

#include <linux/bpf.h>

namespace faultline {

inline constexpr auto kBpfTcxIngress = static_cast<bpf_attach_type>(46);
inline constexpr auto kBpfTcxEgress = static_cast<bpf_attach_type>(47);

}  // namespace faultline
