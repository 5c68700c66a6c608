// libFuzzer target: a line of the guard's activity log, as `faultctl activity
// verify` and a writer reopening its log read it (any bytes). The
// chain check returns an entry or a fault, never crashes; an entry it takes
// is written back as the same canonical line (a `reason` only when not
// empty), so a fresh chain takes the rewritten line too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "userspace/guard/activity_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  faultline::ActivityChain chain;
  auto checked = chain.check_line(line);
  if (auto* fault = std::get_if<faultline::ActivityFault>(&checked)) {
    if (fault->problem.empty() || fault->line != 1) __builtin_trap();
    return 0;
  }
  const auto& e = std::get<faultline::ActivityEntry>(checked);
  if (e.identity.empty() || e.seq != 1 || !e.prev.empty()) __builtin_trap();
  if (faultline::activity_hash(e) != e.hash) __builtin_trap();
  faultline::ActivityChain again;
  if (!std::holds_alternative<faultline::ActivityEntry>(again.check_line(faultline::activity_line(e))))
    __builtin_trap();
  return 0;
}
