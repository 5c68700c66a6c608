// The proposer's token ledger: C_turn from a turn's usage, thinking counted
// only when billed outside the output, and the loop's halt once past theta.
#include "userspace/orchestration/ledger.h"

#include <gtest/gtest.h>

namespace florch {
namespace {

using faultline::TokenLedger;
using faultline::TurnUsage;

TEST(Ledger, ATurnCostsItsTokensAndToolCalls) {
  TokenLedger l;
  // 0.0001 * (1000 + 500) + 0.01 * 2
  EXPECT_DOUBLE_EQ(l.cost({1000, 500, 0, true, 2}), 0.17);
  // Thinking already in the output: not counted twice.
  EXPECT_DOUBLE_EQ(l.cost({1000, 500, 300, true, 0}), 0.15);
  // Billed on its own: counted.
  EXPECT_DOUBLE_EQ(l.cost({1000, 500, 300, false, 0}), 0.18);
  EXPECT_DOUBLE_EQ(l.cost({-5, -1, -1, false, -3}), 0) << "negative counts are not a credit";
}

// The loop's rule: ask may_call() before each call, charge() after it. A
// model whose turns cost 0.8 crosses theta 2.0 at its third turn and gets
// exactly 3 calls.
TEST(Ledger, AModelCrossingThetaAtTurnThreeGetsThreeCalls) {
  TokenLedger l;
  const TurnUsage turn{2000, 1000, 0, true, 50};  // 0.3 + 0.5
  int calls = 0;
  while (l.may_call() && calls < 10) {
    ++calls;
    l.charge(turn);
  }
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(l.turns(), 3);
  EXPECT_NEAR(l.spent(), 2.4, 1e-9);
  EXPECT_EQ(l.to_json()["outcome"], "budget_exhausted");

  // At theta exactly, not past it: one more call is allowed (rates that are
  // exact binary fractions, so the sum is exactly theta).
  TokenLedger edge({0.125, 0.5, 2.0});
  edge.charge({8, 0, 0, true, 2});  // 1.0 + 1.0
  EXPECT_TRUE(edge.may_call()) << edge.to_json().dump();
  EXPECT_EQ(edge.to_json()["outcome"], "within_budget");
  edge.charge({1, 0, 0, true, 0});
  EXPECT_FALSE(edge.may_call());
}

}  // namespace
}  // namespace florch
