// libFuzzer: the DNS answer parser that learns host-rule addresses in the
// kernel (bpf/lib/dns_parse.h), through its userspace twin. Every name is
// watched, so every response's answer section is walked. Checked: no crash,
// no hang (every loop is bounded), and a refused section learns nothing.
#include <cstdlib>

#include "userspace/policy/dns_answer_twin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto out = faultline::parse_dns_answer(data, size, [](uint64_t, uint8_t) { return true; });
  if (out.malformed && !out.addrs.empty()) std::abort();
  if (out.addrs.size() > FL_DNS_MAX_ADDRS || out.names.size() > FL_DNS_LEARN_SLOTS) std::abort();
  if (!out.matched && !out.addrs.empty()) std::abort();
  return 0;
}
