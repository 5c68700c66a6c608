// libFuzzer target: a shell script an agent's process hands to `sh -c`, any
// bytes at all: split into simple commands (or refused), and judged by the
// command risk predicate, as it is and through sudo, with the same rules.
#include <cstddef>
#include <cstdint>
#include <string>

#include "userspace/guard/command_risk.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string script(reinterpret_cast<const char*>(data), size);
  auto commands = faultline::shell_commands(script);
  if (!commands && commands.error().message.empty()) __builtin_trap();
  const auto a = faultline::command_risks({"bash", "-c", script});
  const auto b = faultline::command_risks({"sudo", "bash", "-c", script});
  if (a.size() != b.size()) __builtin_trap();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].rule != b[i].rule || a[i].reason.empty() || a[i].command.empty()) __builtin_trap();
  }
  return 0;
}
