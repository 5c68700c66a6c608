// The MCP guard's finance pack without a process: the classifier on tool
// names and arguments of real broker and payment servers, NYSE hours at
// chosen instants, the limits' order of judgement, and the ledger's file
// across a reopen with an injected clock.
#include "userspace/guard/mcp_finance.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "userspace/guard/mcp_finance_ledger.h"

namespace faultline {
namespace {

using nlohmann::json;
using std::chrono::system_clock;

system_clock::time_point at(int64_t unix_s) { return system_clock::time_point(std::chrono::seconds(unix_s)); }

FinanceAction classify(const std::string& tool, const json& args) { return classify_finance_action(tool, &args); }

TEST(FinanceClassifier, ToolNamesOfBrokerAndPaymentServers) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"place_stock_order", "order_place"},
      {"place_crypto_order", "order_place"},
      {"placeOrder", "order_place"},
      {"create_order", "order_place"},
      {"order_buy_market", "order_place"},
      {"trade", "order_place"},
      {"close_all_positions", "order_place"},
      {"submit_orders", "order_place"},
      {"cancel_order_by_id", "order_cancel"},
      {"cancel_all_orders", "order_cancel"},
      {"replace_order_by_id", "order_modify"},
      {"modify_order", "order_modify"},
      {"withdraw_funds", "withdraw"},
      {"create_payout", "withdraw"},
      {"transfer_funds", "transfer"},
      {"send_money", "transfer"},
      {"create_refund", "transfer"},
      {"deposit", "deposit"},
      {"update_bank_account", "account_setting"},
      {"create_api_key", "account_setting"},
      {"disable_2fa", "account_setting"},
      {"set_leverage", "account_setting"},
      {"upgrade_options_level", "account_setting"},
      {"add_withdrawal_address", "account_setting"},
      {"get_orders", "none"},
      {"get_order", "none"},
      {"order_status", "none"},
      {"get_account_info", "none"},
      {"list_orders", "none"},
      {"preview_order", "none"},
      {"get_api_keys", "none"},
      {"orders", "none"},
      {"read_file", "none"},
      {"get_stock_quote", "none"},
  };
  for (const auto& [tool, kind] : cases)
    EXPECT_EQ(finance_action_name(classify_finance_action(tool, nullptr).kind), kind) << tool;
  EXPECT_EQ(classify("update_bank_account", json::object()).setting, "bank_details");
  EXPECT_EQ(classify("create_api_key", json::object()).setting, "api_keys");
  EXPECT_EQ(classify("disable_2fa", json::object()).setting, "2fa");
  EXPECT_EQ(classify("enableMarginTrading", json::object()).setting, "margin_level");
  EXPECT_EQ(classify("request_options_approval", json::object()).setting, "options_level");
}

TEST(FinanceClassifier, OrderFactsAndValue) {
  // Alpaca's place_stock_order: quantity x limit price.
  auto a = classify(
      "place_stock_order",
      {{"symbol", "AAPL"}, {"side", "buy"}, {"quantity", 10}, {"order_type", "limit"}, {"limit_price", "150.5"}});
  EXPECT_EQ(a.symbol, "AAPL");
  EXPECT_EQ(a.side, "buy");
  ASSERT_TRUE(a.value);
  EXPECT_DOUBLE_EQ(*a.value, 1505);
  EXPECT_EQ(a.describe(), "order_place symbol=AAPL side=buy qty=10 price=150.5 value=1505");
  // A notional field wins over quantity x price; camelCase keys; "$1,200".
  a = classify("placeOrder",
               {{"ticker", "MSFT"}, {"orderSide", "SELL"}, {"notional", "$1,200"}, {"qty", 3}, {"limitPrice", 500}});
  EXPECT_EQ(a.side, "sell");
  EXPECT_DOUBLE_EQ(*a.value, 1200);
  // One object down: {"order": {...}}.
  a = classify("submit_order", {{"order", {{"symbol", "SPY"}, {"qty", "2"}, {"price", 400}}}});
  EXPECT_EQ(a.symbol, "SPY");
  EXPECT_DOUBLE_EQ(*a.value, 800);
  // A market order by quantity: no value. The side from the name.
  a = classify("order_sell_market", {{"symbol", "TSLA"}, {"quantity", 5}});
  EXPECT_FALSE(a.value);
  EXPECT_EQ(a.side, "sell");
  // A negative or non-numeric amount is no amount.
  EXPECT_FALSE(classify("create_order", {{"quantity", -5}, {"price", 10}}).value);
  EXPECT_FALSE(classify("create_order", {{"quantity", "lots"}, {"price", 10}}).value);
  // Money moved: its amount; a transfer in is a deposit.
  a = classify("transfer_funds", {{"amount", 250}, {"currency", "USD"}});
  EXPECT_DOUBLE_EQ(*a.value, 250);
  EXPECT_EQ(a.symbol, "USD");
  EXPECT_EQ(classify("transfer_funds", {{"amount", 250}, {"direction", "INCOMING"}}).kind, FinanceActionKind::Deposit);
}

TEST(FinanceHours, NyseRegularHoursAcrossDaylightSaving) {
  // 2026-12-07 (Monday, EST): 14:29:59Z is 09:29:59 New York, 14:30Z opens, 20:59:59Z open, 21:00Z closed.
  EXPECT_FALSE(nyse_regular_hours(at(1796653799)));
  EXPECT_TRUE(nyse_regular_hours(at(1796653800)));
  EXPECT_TRUE(nyse_regular_hours(at(1796677199)));
  EXPECT_FALSE(nyse_regular_hours(at(1796677200)));
  // 2026-07-15 (Wednesday, EDT): 13:30Z opens, 20:00Z closes.
  EXPECT_FALSE(nyse_regular_hours(at(1784122199)));
  EXPECT_TRUE(nyse_regular_hours(at(1784122200)));
  EXPECT_FALSE(nyse_regular_hours(at(1784145600)));
  // 2026-12-05 (Saturday) at 15:00Z: closed.
  EXPECT_FALSE(nyse_regular_hours(at(1796482800)));
  // 2026-03-09, the Monday after the switch (EDT from 2026-03-08 07:00Z): 13:30Z is 09:30.
  EXPECT_TRUE(nyse_regular_hours(at(1773063000)));
  // 2026-03-06, the Friday before (EST): 13:30Z is 08:30, closed; 14:30Z open.
  EXPECT_FALSE(nyse_regular_hours(at(1772803800)));
  EXPECT_TRUE(nyse_regular_hours(at(1772807400)));
}

TEST(FinanceJudge, EachLimitInItsOrder) {
  const auto open_time = at(1796653800);    // Monday 09:30 New York
  const auto closed_time = at(1796677200);  // Monday 16:00
  FinanceLimits l;
  l.max_order_value = 10000;
  l.approve_over = 1000;
  l.daily_limit = 20000;
  l.max_orders_per_hour = 3;
  l.outlier_factor = 5;
  l.deny_account_danger = true;
  l.market_hours = true;
  const auto order = [](double value) {
    FinanceAction a;
    a.kind = FinanceActionKind::OrderPlace;
    a.value = value;
    return a;
  };
  const auto rule = [&](const FinanceAction& a, const FinanceHistory& h, system_clock::time_point t) {
    const FinanceVerdict v = judge_finance(a, l, h, t);
    return std::string(guard_verdict_name(v.verdict)) + " " + v.rule;
  };
  EXPECT_EQ(rule(order(500), {}, open_time), "allow ");
  EXPECT_EQ(rule(order(10001), {}, open_time), "deny max_order_value");
  EXPECT_EQ(rule(order(5000), {}, open_time), "approve approve_over");
  EXPECT_EQ(rule(order(900), {19500, 0, {}}, open_time), "deny daily_limit");
  EXPECT_EQ(rule(order(100), {0, 3, {}}, open_time), "deny max_orders_per_hour");
  EXPECT_EQ(rule(order(600), {0, 0, {100, 100, 120}}, open_time), "approve outlier");
  EXPECT_EQ(rule(order(600), {0, 0, {100, 120}}, open_time), "allow ");  // fewer than 3: no median
  EXPECT_EQ(rule(order(500), {}, closed_time), "approve market_hours");
  FinanceAction unknown;
  unknown.kind = FinanceActionKind::OrderPlace;
  EXPECT_EQ(rule(unknown, {}, open_time), "approve order_value_unknown");
  FinanceAction w;
  w.kind = FinanceActionKind::Withdraw;
  EXPECT_EQ(rule(w, {}, open_time), "deny account_danger");
  w.kind = FinanceActionKind::AccountSetting;
  w.setting = "api_keys";
  const FinanceVerdict v = judge_finance(w, l, {}, open_time);
  EXPECT_EQ(v.reason, "a change of the account's api_keys");
  FinanceAction cancel;
  cancel.kind = FinanceActionKind::OrderCancel;
  EXPECT_EQ(rule(cancel, {}, closed_time), "allow ");
  // A deny limit is judged before a hold: over the cap at night is denied.
  EXPECT_EQ(rule(order(20000), {}, closed_time), "deny max_order_value");
  EXPECT_EQ(judge_finance(order(10001), l, {}, open_time).reason, "the order's value 10001 is over the cap 10000");
  // Without limits, nothing is judged.
  EXPECT_EQ(judge_finance(order(1e9), FinanceLimits{}, {}, closed_time).verdict, GuardVerdict::Allow);
}

TEST(FinanceAmounts, ParseMedianFormat) {
  EXPECT_EQ(parse_finance_amount("2500.50"), 2500.5);
  EXPECT_EQ(parse_finance_amount("$1,000"), 1000);
  EXPECT_FALSE(parse_finance_amount("-1"));
  EXPECT_FALSE(parse_finance_amount("1e9"));
  EXPECT_FALSE(parse_finance_amount(""));
  EXPECT_FALSE(parse_finance_amount("1.2.3"));
  EXPECT_EQ(finance_median({5, 1, 3}), 3);
  EXPECT_EQ(finance_median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(format_finance_amount(1505), "1505");
  EXPECT_EQ(format_finance_amount(0.1 + 0.2), "0.3");
}

TEST(FinanceLedgerFile, DayTotalSurvivesAReopenAndEndsWithTheUtcDay) {
  char tmpl[] = "/tmp/fl-finance-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string file = mcp_finance_file(dir, "broker");
  int64_t now = 1796653800;  // 2026-12-07 14:30Z
  const auto clock = [&now] { return at(now); };
  FinanceAction o;
  o.kind = FinanceActionKind::OrderPlace;
  o.value = 600;
  {
    auto l = FinanceLedger::open(file, clock);
    ASSERT_TRUE(l) << l.error().describe();
    ASSERT_TRUE((*l)->record(o));
    now += 60;
    ASSERT_TRUE((*l)->record(o));
    EXPECT_EQ((*l)->history().session_values.size(), 2u);
  }
  auto l = FinanceLedger::open(file, clock);
  ASSERT_TRUE(l);
  FinanceHistory h = (*l)->history();
  EXPECT_DOUBLE_EQ(h.day_total, 1200);
  EXPECT_EQ(h.orders_last_hour, 2u);
  EXPECT_TRUE(h.session_values.empty());  // a new session
  now += 3600;                            // the hour's count ends, the day's total stays
  h = (*l)->history();
  EXPECT_EQ(h.orders_last_hour, 0u);
  EXPECT_DOUBLE_EQ(h.day_total, 1200);
  now = 1796688000;  // 2026-12-08 00:00Z: a new UTC day
  EXPECT_DOUBLE_EQ((*l)->history().day_total, 0);
  // A file that is not the ledger is refused, its path named.
  ASSERT_TRUE(write_text_file(file, "{\"version\":1}"));
  auto broken = FinanceLedger::open(file, clock);
  ASSERT_FALSE(broken);
  EXPECT_TRUE(broken.error().bad_input);
  EXPECT_NE(broken.error().message.find(file), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace faultline
