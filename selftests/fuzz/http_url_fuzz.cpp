// libFuzzer target: URL and address parsers fed operator text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/units.h"
#include "userspace/guardrails/http.h"
#include "userspace/net/address.h"
#include "userspace/net/egress_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  auto u = faultline::parse_http_url(in);
  if (u.ok() && (u->host.empty() || u->port == 0 || u->path.empty() || u->path[0] != '/')) __builtin_trap();
  auto p = faultline::parse_prefix(in);
  if (p.ok() && p->plen > 128) __builtin_trap();
  (void)faultline::parse_rule(faultline::Verdict::Deny, in);
  (void)faultline::parse_duration_ns(in);
  (void)faultline::parse_size_bytes(in);
  (void)faultline::parse_port_range(in);
  return 0;
}
