// libFuzzer target: the policy parser reads files from pull requests, so any
// bytes at all. Every refusal names where and why; what parses also compiles.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "userspace/policy/policy_compiler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  faultline::PolicyParse p = faultline::parse_policy(in);
  for (const auto& e : p.errors) {
    if (e.reason.empty() || e.path.empty() || e.mark.line < 1 || e.mark.column < 1) __builtin_trap();
  }
  if (p.ok()) {
    auto c = faultline::compile_policy(p.policy);
    if (!c.ok()) __builtin_trap();  // validation promised the compiler would accept it
    (void)faultline::compiled_text(*c);
    (void)faultline::compiled_json(*c);
  }
  return 0;
}
