// LLM budgets: admission under concurrency never overshoots, settle and
// release arithmetic, the window's end with an injected clock, and the state
// file across a restart.
#include "userspace/guard/llm_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "base/files.h"

namespace faultline {
namespace llm_budget_test {

using std::chrono::seconds;
using std::chrono::system_clock;

// A clock the test moves; starts at a window boundary plus 10 s.
struct FakeClock {
  std::shared_ptr<std::atomic<int64_t>> now = std::make_shared<std::atomic<int64_t>>(1'700'000'000 / 3600 * 3600 + 10);
  LocalBudgetStore::Clock fn() const {
    auto n = now;
    return [n] { return system_clock::time_point(seconds(n->load())); };
  }
};

std::unique_ptr<LocalBudgetStore> open_store(LlmBudgetLimits limits, const std::string& dir = "",
                                             const FakeClock& clock = {}) {
  auto s = LocalBudgetStore::open(std::move(limits), dir, clock.fn(), std::chrono::milliseconds(0));
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().describe());
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(LlmBudget, TwentyConcurrentCallsBudgetForTenExactlyTenAdmitted) {
  for (int round = 0; round < 20; ++round) {
    auto store = open_store(LlmBudgetLimits{.tokens = 10 * 1000});
    std::atomic<int> admitted{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 20; ++i) {
      threads.emplace_back([&] {
        while (!go.load()) std::this_thread::yield();
        auto a = store->reserve("alice", 1000);
        if (a.ok() && a->admitted) admitted.fetch_add(1);
      });
    }
    go = true;
    for (auto& t : threads) t.join();
    ASSERT_EQ(admitted.load(), 10) << "round " << round;
    const BudgetCharge c = store->charged("alice");
    EXPECT_EQ(c.tokens, 10'000u);
    EXPECT_EQ(c.requests, 10u);
  }
}

TEST(LlmBudget, RequestBudgetCountsCalls) {
  auto store = open_store(LlmBudgetLimits{.requests = 3});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(store->reserve("bob", 4096)->admitted);
  auto refused = store->reserve("bob", 1);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->admitted);
  EXPECT_EQ(refused->reason, "LLM request budget exhausted: 3 of 3 calls per 1h used");
  EXPECT_TRUE(store->reserve("carol", 1)->admitted);  // budgets are per identity
}

TEST(LlmBudget, SettleAndReleaseArithmetic) {
  auto store = open_store(LlmBudgetLimits{.tokens = 10'000});
  auto a = store->reserve("alice", 4096);
  auto b = store->reserve("alice", 4096);
  ASSERT_TRUE(a->admitted && b->admitted);
  auto c = store->reserve("alice", 4096);  // 8192 + 4096 > 10000
  ASSERT_FALSE(c->admitted);
  EXPECT_NE(c->reason.find("8192 of 10000 output tokens"), std::string::npos) << c->reason;

  EXPECT_TRUE(store->settle(a->reservation, 150));  // billed 150 of the 4096 reserved
  EXPECT_EQ(store->charged("alice").tokens, 4096u + 150u);
  EXPECT_FALSE(store->settle(a->reservation, 150));  // once only
  EXPECT_FALSE(store->release(a->reservation));
  EXPECT_EQ(store->charged("alice").requests, 2u);

  EXPECT_TRUE(store->release(b->reservation));  // never reached the upstream
  EXPECT_EQ(store->charged("alice").tokens, 150u);
  EXPECT_EQ(store->charged("alice").requests, 1u);

  // A call billed beyond its reservation (no max tokens known) is charged in full.
  auto d = store->reserve("alice", 100);
  EXPECT_TRUE(store->settle(d->reservation, 9000));
  EXPECT_EQ(store->charged("alice").tokens, 9150u);
  EXPECT_FALSE(store->reserve("alice", 1000)->admitted);
  // A call whose ceiling exceeds the whole budget can never be admitted.
  auto huge = store->reserve("zed", 10'001);
  EXPECT_FALSE(huge->admitted);
}

TEST(LlmBudget, CeilingIsMaxTokensElseTheDefaultReserve) {
  LlmBudgetLimits limits;
  LlmRequestFacts facts;
  EXPECT_EQ(budget_ceiling(facts, limits), 4096u);
  facts.max_tokens = 300;
  EXPECT_EQ(budget_ceiling(facts, limits), 300u);
  limits.default_reserve = 1;
  facts.max_tokens.reset();
  EXPECT_EQ(budget_ceiling(facts, limits), 1u);
}

TEST(LlmBudget, WindowEndsOnItsBoundary) {
  FakeClock clock;
  auto store = open_store(LlmBudgetLimits{.tokens = 100, .requests = 1}, "", clock);
  auto a = store->reserve("alice", 100);
  ASSERT_TRUE(a->admitted);
  EXPECT_FALSE(store->reserve("alice", 1)->admitted);
  *clock.now += 3600 - 11;  // the last second of the window
  EXPECT_FALSE(store->reserve("alice", 1)->admitted);
  *clock.now += 1;  // the next window
  EXPECT_EQ(store->charged("alice").tokens, 0u);
  auto b = store->reserve("alice", 100);
  EXPECT_TRUE(b->admitted);
  // Settling the old window's call changes nothing in the new one.
  EXPECT_FALSE(store->settle(a->reservation, 1));
  EXPECT_EQ(store->charged("alice").tokens, 100u);
}

TEST(LlmBudget, StateSurvivesARestart) {
  auto dir = TempFolder::create("fl-llm-budget");
  ASSERT_TRUE(dir.ok());
  FakeClock clock;
  const LlmBudgetLimits limits{.tokens = 1000, .requests = 10};
  {
    auto store = open_store(limits, dir->path(), clock);
    auto a = store->reserve("alice", 500);
    ASSERT_TRUE(store->settle(a->reservation, 120));
    (void)store->reserve("bob", 300);  // open at the restart: stays charged
    ASSERT_TRUE(store->flush().ok());
  }
  auto text = read_text_file(dir->path() + "/llm-budget.json");
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("\"window_s\":3600"), std::string::npos) << *text;
  {
    auto store = open_store(limits, dir->path(), clock);
    EXPECT_EQ(store->charged("alice").tokens, 120u);
    EXPECT_EQ(store->charged("alice").requests, 1u);
    EXPECT_EQ(store->charged("bob").tokens, 300u);
    EXPECT_TRUE(store->reserve("bob", 700)->admitted);
    EXPECT_FALSE(store->reserve("bob", 1)->admitted);
  }  // saved on the way out
  {
    auto store = open_store(limits, dir->path(), clock);
    EXPECT_EQ(store->charged("bob").tokens, 1000u);
    *clock.now += 3600;
    EXPECT_EQ(store->charged("bob").tokens, 0u);  // the window passed while it was down
  }
  // Another window length: the old counters do not apply.
  auto other = open_store(LlmBudgetLimits{.tokens = 1000, .window = seconds(60)}, dir->path(), clock);
  EXPECT_EQ(other->charged("alice").tokens, 0u);
  other.reset();
  // A corrupt file is refused, naming it.
  { std::ofstream(dir->path() + "/llm-budget.json") << "{not json"; }
  auto bad = LocalBudgetStore::open(limits, dir->path(), clock.fn());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("llm-budget.json: not a JSON object"), std::string::npos);
}

TEST(LlmBudget, ParseWindow) {
  EXPECT_EQ(parse_budget_window("1h").value(), seconds(3600));
  EXPECT_EQ(parse_budget_window("30m").value(), seconds(1800));
  EXPECT_EQ(parse_budget_window("7d").value(), seconds(7 * 86400));
  EXPECT_EQ(parse_budget_window("90s").value(), seconds(90));
  for (const char* bad : {"", "0s", "1.5s", "500ms", "h", "d", "10"}) {
    auto r = parse_budget_window(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_TRUE(r.error().bad_input) << bad;
    }
  }
}

}  // namespace llm_budget_test
}  // namespace faultline
