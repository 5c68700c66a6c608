// C_turn and the budget check of the proposer's loop.
#include "userspace/orchestration/ledger.h"

#include <algorithm>

namespace faultline {

double TokenLedger::cost(const TurnUsage& u) const {
  auto n = [](int64_t v) { return static_cast<double>(std::max<int64_t>(v, 0)); };
  const double thoughts = u.thinking_in_output ? 0 : n(u.thinking_tokens);
  return rates_.kappa * (n(u.input_tokens) + n(u.output_tokens) + thoughts) + rates_.psi * n(u.tool_calls);
}

double TokenLedger::charge(const TurnUsage& u) {
  const double c = cost(u);
  spent_ += c;
  ++turns_;
  return c;
}

nlohmann::json TokenLedger::to_json() const {
  return {{"spent", spent_},       {"budget", rates_.theta},
          {"turns", turns_},       {"outcome", may_call() ? "within_budget" : "budget_exhausted"},
          {"kappa", rates_.kappa}, {"psi", rates_.psi}};
}

}  // namespace faultline
