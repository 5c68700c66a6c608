// libFuzzer target: the Prometheus answer parser reads whatever the server (or
// anything answering on its port) sends.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "userspace/guardrails/prometheus_answer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = faultline::parse_prometheus_answer(in);
  if (!r.ok() && r.error().message.empty()) __builtin_trap();  // every refusal says why
  return 0;
}
