// libbpf's own messages: silent unless FAULTLINE_LIBBPF_LOG is set.
#pragma once

namespace faultline {

// Routes libbpf's log to stderr only when FAULTLINE_LIBBPF_LOG=1 (or "debug").
// Probes and reconciliation expect failures; their noise would hide real errors.
void configure_libbpf_log();

}  // namespace faultline
