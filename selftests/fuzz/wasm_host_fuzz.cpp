// libFuzzer target: the --wasm-policy host interface (userspace/guard/wasm_policy).
// The first byte chooses what the rest is: 0, the bytes a plugin's decide
// answered (parse_wasm_verdict); otherwise, a module's bytes into the loader
// (checks, metering, wabt's validation) and, when it loads, one decision with
// a small fuel budget. Nothing may crash; a refusal names the module, and a
// verdict's reason stays within its limit.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "userspace/guard/wasm_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] == 0) {
    auto v = faultline::parse_wasm_verdict(rest);
    if (v && v->reason.size() > faultline::WasmLimits::kReasonBytes) __builtin_trap();
    return 0;
  }
  faultline::WasmLimits limits;
  limits.fuel = 20'000;
  limits.memory_pages = 4;
  auto p = faultline::WasmPolicy::from_bytes(rest, "fuzz.wasm", limits);
  if (!p) {
    if (p.error().message.rfind("fuzz.wasm: ", 0) != 0) __builtin_trap();
    return 0;
  }
  const auto d = (*p)->decide(R"({"method":"POST","host":"example.com","port":80,"path":"/admin"})");
  if (d.fuel_used > limits.fuel) __builtin_trap();
  if (d.end == faultline::WasmEnd::answered && d.verdict.reason.size() > faultline::WasmLimits::kReasonBytes)
    __builtin_trap();
  if (d.end != faultline::WasmEnd::answered && d.why.empty()) __builtin_trap();
  return 0;
}
