// libFuzzer target: the --content-policy file's parser (an operator's file,
// any bytes). It returns rules or one error naming FILE:LINE, never crashes;
// each rule has a label and a pattern from its own line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "userspace/guard/content_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto rules = faultline::parse_content_policy(text, "fuzz.txt");
  if (!rules) {
    if (rules.error().message.rfind("fuzz.txt:", 0) != 0) __builtin_trap();
    return 0;
  }
  for (const auto& r : *rules)
    if (r.label.empty() || r.pattern.empty() || r.line == 0) __builtin_trap();
  return 0;
}
