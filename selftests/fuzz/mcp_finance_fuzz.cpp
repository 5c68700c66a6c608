// libFuzzer target: a tools/call as the MCP guard's finance pack reads it,
// any bytes: the first line is the tool's name, the rest its arguments (JSON
// when it parses, else none). The action's amounts are finite and not
// negative, its facts print, and the limits judge it at an instant taken
// from the input (within +-1000 years of 1970), NYSE hours included.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "userspace/guard/mcp_finance.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string_view tool = in.substr(0, nl);
  const std::string_view rest = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  const nlohmann::json args = nlohmann::json::parse(rest, nullptr, false);
  const faultline::FinanceAction a = faultline::classify_finance_action(tool, args.is_discarded() ? nullptr : &args);
  for (const auto& v : {a.quantity, a.price, a.value})
    if (v && (!std::isfinite(*v) || *v < 0)) __builtin_trap();
  if (a.describe().empty()) __builtin_trap();
  int64_t seconds = 0;
  std::memcpy(&seconds, data, std::min(size, sizeof seconds));
  seconds %= int64_t{1000} * 366 * 86400;
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(seconds));
  faultline::FinanceHistory h;
  h.session_values = {1, 2, 3};
  const auto v = faultline::judge_finance(a, faultline::finance_pack_defaults(), h, now);
  if (v.verdict != faultline::GuardVerdict::Allow && v.rule.empty()) __builtin_trap();
  return 0;
}
