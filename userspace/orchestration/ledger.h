// The proposer's token ledger (issue 29 §6): what each model turn costs, and
// when the loop must stop. A turn costs
//   C_turn = kappa * (T_in + T_out + T_thoughts) + psi * tool_calls
// (T_thoughts only when the provider bills thinking outside T_out), and once
// the spent total is past theta the loop halts before its next call, with
// `budget_exhausted`. The proposer itself (its model clients, tools and
// loop) is not built yet: this is the rule it will be held to.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace faultline {

struct LedgerRates {
  double kappa = 0.0001;  // per token
  double psi = 0.01;      // per tool call
  double theta = 2.0;     // the budget of one proposal
};

// What a provider reported for one turn.
struct TurnUsage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t thinking_tokens = 0;
  bool thinking_in_output = true;  // the provider already counts thinking in output_tokens
  int64_t tool_calls = 0;
};

class TokenLedger {
 public:
  explicit TokenLedger(LedgerRates rates = {}) : rates_(rates) {}

  // C_turn of a turn (negative counts are taken as 0).
  [[nodiscard]] double cost(const TurnUsage& u) const;
  // Books a turn that was made; returns its cost.
  double charge(const TurnUsage& u);
  // Whether another call may be made: false once the spent total is past theta.
  [[nodiscard]] bool may_call() const { return spent_ <= rates_.theta; }
  [[nodiscard]] double spent() const { return spent_; }
  [[nodiscard]] int64_t turns() const { return turns_; }
  // {"spent", "budget", "turns", "outcome": "within_budget"|"budget_exhausted", "kappa", "psi"}
  [[nodiscard]] nlohmann::json to_json() const;

 private:
  LedgerRates rates_;
  double spent_ = 0;
  int64_t turns_ = 0;
};

}  // namespace faultline
