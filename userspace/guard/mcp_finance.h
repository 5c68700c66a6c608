// The MCP guard's finance pack: each tools/call of a trading, payment or
// broker server classified into an action (an order placed, cancelled or
// modified; money moved; an account setting changed) from its tool name and
// arguments, and the pack's limits judged on it. Pure: the ledger and the
// clock come from the caller (mcp_finance_ledger.h, McpGate).
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/guard/guard_rule.h"

namespace faultline {

enum class FinanceActionKind : uint8_t {
  None,            // not a finance action (a quote, a list, an unknown tool)
  OrderPlace,      // a new order, a position closed
  OrderCancel,     // an order cancelled
  OrderModify,     // an order replaced or amended
  Transfer,        // money moved out (a transfer, a wire, a payment sent)
  Withdraw,        // a withdrawal, a payout
  Deposit,         // money moved in
  AccountSetting,  // bank details, API keys, 2FA, margin or options level changed
};

// "order_place", "order_cancel", ... "account_setting"; "none".
[[nodiscard]] std::string_view finance_action_name(FinanceActionKind k);

// What the classifier read from one call.
struct FinanceAction {
  FinanceActionKind kind = FinanceActionKind::None;
  std::string setting;  // AccountSetting: bank_details, api_keys, 2fa, margin_level, options_level
  std::string symbol;
  std::string side;  // "buy" or "sell"; "" when neither the name nor the arguments say
  std::optional<double> quantity, price;
  // An order: its notional field, else quantity x price. Money moved: its
  // amount. Unset when the call does not say (a market order by quantity).
  std::optional<double> value;

  [[nodiscard]] bool is_order() const {
    return kind == FinanceActionKind::OrderPlace || kind == FinanceActionKind::OrderModify;
  }
  // The facts as an activity line and the log show them:
  // "order_place symbol=AAPL side=buy qty=10 price=150 value=1500".
  [[nodiscard]] std::string describe() const;
};

// The action of a tools/call: the tool name's words (split at '_', '-', '.',
// '/' and camelCase) give the kind, the arguments (top level, or one object
// down: {"order": {...}}) the symbol, side, quantity, price and value. The
// table is in docs/gates.md ("Finance actions"). arguments may be null.
[[nodiscard]] FinanceAction classify_finance_action(std::string_view tool, const nlohmann::json* arguments);

// The limits; each unset one is off. Amounts are in the account's currency,
// as the server takes them (no conversion).
struct FinanceLimits {
  std::optional<double> max_order_value;        // an order over it: denied
  std::optional<double> approve_over;           // an order over it: held for approval
  std::optional<double> daily_limit;            // the UTC day's orders over it: denied
  std::optional<uint64_t> max_orders_per_hour;  // more orders in the last hour: denied
  std::optional<double> outlier_factor;         // an order over F x the session's median: held
  bool deny_account_danger = false;             // withdrawals, transfers out, account settings: denied
  bool market_hours = false;                    // orders outside NYSE regular hours: held

  // A limit on an order's value is set (an order of unknown value is then held).
  [[nodiscard]] bool caps_value() const { return max_order_value || approve_over || daily_limit; }
};

// What --finance-pack turns on (each flag given beside it wins).
[[nodiscard]] FinanceLimits finance_pack_defaults();

// The orders already sent, as the limits count them.
struct FinanceHistory {
  double day_total = 0;                // the values of the UTC day's orders
  uint64_t orders_last_hour = 0;       // orders sent in the 3600 s before now
  std::vector<double> session_values;  // this session's orders of known value, in order
};

// The outlier test's minimum: a median of fewer orders says little.
constexpr size_t kFinanceOutlierMinOrders = 3;

struct FinanceVerdict {
  GuardVerdict verdict = GuardVerdict::Allow;
  std::string rule;  // "max_order_value", "daily_limit", ...; "" when allowed
  std::string reason;
};

// The limits on one action at `now`: the deny limits first (account danger,
// max order value, daily limit, orders per hour), then the holds (order value
// unknown, approve over, outlier, market hours); the first that applies decides.
[[nodiscard]] FinanceVerdict judge_finance(const FinanceAction& a, const FinanceLimits& l, const FinanceHistory& h,
                                           std::chrono::system_clock::time_point now);

// NYSE regular hours: 09:30-16:00 America/New_York (US daylight saving time
// from the second Sunday of March to the first Sunday of November), Monday
// to Friday. Exchange holidays and early closes are not known.
[[nodiscard]] bool nyse_regular_hours(std::chrono::system_clock::time_point t);

// The median of a list (the mean of the two middle values when even); 0 when empty.
[[nodiscard]] double finance_median(std::vector<double> values);

// An amount as a flag or an argument writes it: "2500", "2500.50", "$1,200";
// finite, not negative.
[[nodiscard]] std::optional<double> parse_finance_amount(std::string_view text);

// An amount as the log writes it: at most two decimals, no trailing zeros.
[[nodiscard]] std::string format_finance_amount(double v);

}  // namespace faultline
