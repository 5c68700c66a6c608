// libFuzzer target: a --creds file, any bytes at all: parsed, or refused with
// a message naming the file; what parses holds only checked entries.
#include <cstddef>
#include <cstdint>
#include <string>

#include "userspace/guard/creds_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto f = faultline::parse_creds_json(text, "creds.json");
  if (!f) {
    if (f.error().message.rfind("creds.json: ", 0) != 0 || !f.error().bad_input) __builtin_trap();
    return 0;
  }
  for (const auto& c : f->http) {
    if (c.host.empty() || c.header.empty() || c.value.find("${SECRET}") == std::string::npos) __builtin_trap();
    const std::string v = faultline::expand_secret(c.value, "k");
    if (v.find("${SECRET}") != std::string::npos) __builtin_trap();
  }
  return 0;
}
