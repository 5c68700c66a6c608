// `faultctl guard`'s HTTP faults: the --fault-* flags (one fault) and --faults
// FILE (a list of them, YAML or JSON), each a host and what its requests meet.
// The guard redirects the host's connections to a proxy in faultctl, which
// applies them after the guard's policy has let the connect through.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/faults/stream/spec.h"
#include "userspace/proxy/http_fault.h"

namespace faultline {

struct GuardFault {
  TcpTarget target;  // HOST[:PORT] (default port 443): its addresses, redirected
  HttpFault fault;   // match.host: HOST (the Host header, or the SNI)
};

struct GuardFaults {
  std::vector<GuardFault> faults;
  bool terminate_tls = false;
  std::string upstream_ca;
  [[nodiscard]] bool empty() const { return faults.empty(); }
};

// One fault as written, from the flags (field names "--fault-host") or from an
// entry of the file (field names "FILE:LINE:COL: faults[2].host").
struct GuardFaultWords {
  std::optional<std::string> host, path, status, delay, truncate, llm, llm_provider, pct, attempts;
  bool reset = false;
};

// Checks and resolves one fault. name(field) spells a field in errors, entry
// the whole fault ("" for the flags); index names the fault (f1_status). A
// fault that needs the plaintext on a TLS port (443) without terminate is
// refused (tls_flags.h).
[[nodiscard]] Result<GuardFault> guard_fault_from_words(const GuardFaultWords& w, bool terminate, size_t index,
                                                        const std::string& entry,
                                                        const std::function<std::string(const std::string&)>& name);

// --faults FILE: a list of faults, or {faults: [...]}; each entry a mapping of
// host, path, status, delay, reset, truncate, llm, llm-provider, pct,
// attempts. Errors are
// "FILE:LINE:COLUMN: faults[N].FIELD: reason".
[[nodiscard]] Result<std::vector<GuardFault>> parse_guard_faults_file(const std::string& file, bool terminate,
                                                                      size_t first_index);

}  // namespace faultline
