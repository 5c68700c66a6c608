// libFuzzer target: the health probe's status-line parser reads untrusted bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "userspace/guardrails/http.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = faultline::parse_status_line(in);
  if (r.ok() && (r->code < 100 || r->code > 999)) __builtin_trap();
  return 0;
}
