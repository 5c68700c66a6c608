// Finance actions from tool names and arguments, and the limits on them.
#include "userspace/guard/mcp_finance.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace mcp_finance_detail {

using Words = std::vector<std::string>;
using WordSet = std::set<std::string_view>;

// "placeStockOrder", "place_stock-order" -> place, stock, order.
Words split_words(std::string_view name) {
  Words out;
  std::string cur;
  char prev = 0;
  for (char c : name) {
    const bool alnum = std::isalnum(static_cast<unsigned char>(c)) != 0;
    const bool upper_after_lower = std::isupper(static_cast<unsigned char>(c)) && std::islower(prev);
    if ((!alnum || upper_after_lower) && !cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
    if (alnum) cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    prev = c;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool has_any(const Words& w, const WordSet& set) {
  return std::any_of(w.begin(), w.end(), [&](const std::string& x) { return set.count(x) > 0; });
}

// A name that reads, checks or prices: never an action.
const WordSet kReadFirst = {"get",    "list", "fetch", "search", "show", "view", "describe", "query",     "read",
                            "lookup", "find", "check", "is",     "has",  "can",  "count",    "calculate", "watch"};
const WordSet kReadAnywhere = {"preview", "estimate", "validate",  "simulate", "status", "history", "quote",
                               "quotes",  "book",     "orderbook", "info",     "whatif", "test"};
const WordSet kWriteVerbs = {"set",      "update",     "change", "add",    "create",   "delete",    "remove",
                             "enable",   "disable",    "link",   "unlink", "rotate",   "reset",     "upgrade",
                             "request",  "apply",      "modify", "edit",   "register", "revoke",    "new",
                             "generate", "regenerate", "turn",   "save",   "replace",  "downgrade", "increase"};
const WordSet kOrderWords = {"order", "orders"};
const WordSet kTradeVerbs = {"buy", "sell", "trade", "swap", "short", "cover", "liquidate"};
const WordSet kModifyVerbs = {"replace", "modify", "amend", "edit", "update", "change"};
const WordSet kWithdrawWords = {"withdraw", "withdrawal", "withdrawals", "payout", "payouts"};
const WordSet kPlaceVerbs = {"place", "submit",  "create", "new",  "send", "post",
                             "make",  "execute", "open",   "bulk", "batch"};
const WordSet kMoneyWords = {"money", "funds", "fund", "payment", "cash",  "crypto",
                             "usdc",  "usd",   "btc",  "eth",     "token", "tokens"};

// The account setting a name changes, or "".
std::string setting_of(const Words& w) {
  if (!has_any(w, kWriteVerbs)) return "";
  if (has_any(w, {"bank", "ach", "payee", "beneficiary", "iban", "routing"}) ||
      (has_any(w, kWithdrawWords) && has_any(w, {"address", "addresses", "whitelist", "allowlist"})))
    return "bank_details";
  if (has_any(w, {"apikey", "apikeys", "secret", "secrets"}) ||
      (has_any(w, {"api", "access"}) && has_any(w, {"key", "keys", "token", "tokens", "credential", "credentials"})))
    return "api_keys";
  if (has_any(w, {"2fa", "mfa", "totp", "otp", "twofactor", "authenticator"}) ||
      (has_any(w, {"two"}) && has_any(w, {"factor"})))
    return "2fa";
  if (has_any(w, {"margin", "leverage"})) return "margin_level";
  if (has_any(w, {"option", "options"}) && has_any(w, {"level", "approval", "tier", "permission", "permissions"}))
    return "options_level";
  return "";
}

FinanceActionKind kind_of(const Words& w, std::string& setting) {
  if (w.empty() || kReadFirst.count(w.front()) > 0 || has_any(w, kReadAnywhere)) return FinanceActionKind::None;
  setting = setting_of(w);
  if (!setting.empty()) return FinanceActionKind::AccountSetting;
  if (has_any(w, kWithdrawWords)) return FinanceActionKind::Withdraw;
  if (has_any(w, {"deposit", "deposits"})) return FinanceActionKind::Deposit;
  if (has_any(w, {"transfer", "transfers", "wire", "remit", "pay", "refund", "refunds"}) ||
      (has_any(w, {"send"}) && has_any(w, kMoneyWords)))
    return FinanceActionKind::Transfer;
  if (has_any(w, {"cancel"}))
    return has_any(w, kOrderWords) || w.size() == 1 ? FinanceActionKind::OrderCancel : FinanceActionKind::None;
  if (has_any(w, kOrderWords) && has_any(w, kModifyVerbs)) return FinanceActionKind::OrderModify;
  if (has_any(w, {"order"}) || (has_any(w, {"orders"}) && has_any(w, kPlaceVerbs)) || has_any(w, kTradeVerbs))
    return FinanceActionKind::OrderPlace;
  if (has_any(w, {"close"}) && has_any(w, {"position", "positions"})) return FinanceActionKind::OrderPlace;
  return FinanceActionKind::None;
}

// An argument's key as the tables compare it: lower case, no '_' or '-'.
std::string key_of(std::string_view k) {
  std::string out;
  for (char c : k)
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The first of `keys` (in their order) found at the top level of args, else
// in an object one level down.
const nlohmann::json* find_arg(const nlohmann::json& args, std::initializer_list<std::string_view> keys) {
  for (std::string_view want : keys)
    for (const auto& [k, v] : args.items())
      if (key_of(k) == want && !v.is_null()) return &v;
  for (std::string_view want : keys)
    for (const auto& [k, inner] : args.items()) {
      if (!inner.is_object()) continue;
      for (const auto& [k2, v] : inner.items())
        if (key_of(k2) == want && !v.is_null()) return &v;
    }
  return nullptr;
}

std::optional<double> amount_arg(const nlohmann::json& args, std::initializer_list<std::string_view> keys) {
  const nlohmann::json* v = find_arg(args, keys);
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) {
    const double d = v->get<double>();
    return std::isfinite(d) && d >= 0 ? std::optional<double>(d) : std::nullopt;
  }
  if (v->is_string()) return parse_finance_amount(v->get_ref<const std::string&>());
  return std::nullopt;
}

std::string text_arg(const nlohmann::json& args, std::initializer_list<std::string_view> keys) {
  const nlohmann::json* v = find_arg(args, keys);
  if (v == nullptr || !v->is_string()) return "";
  return v->get<std::string>().substr(0, 64);
}

std::string side_of(const Words& w, const nlohmann::json* args) {
  std::string s = args != nullptr ? text_arg(*args, {"side", "orderside", "action", "direction", "instruction"}) : "";
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "buy" || s == "long" || s == "bid" || s.starts_with("buy_")) return "buy";
  if (s == "sell" || s == "short" || s == "ask" || s.starts_with("sell_")) return "sell";
  if (has_any(w, {"buy", "cover"})) return "buy";
  if (has_any(w, {"sell", "short", "close", "liquidate"})) return "sell";
  return "";
}

// The order's facts; the value from its notional field, else quantity x price.
void read_order(FinanceAction& a, const nlohmann::json& args) {
  a.symbol = text_arg(args, {"symbol", "ticker", "instrument", "asset", "pair", "productid", "security", "stock",
                             "coin", "market", "underlying"});
  a.quantity =
      amount_arg(args, {"quantity", "qty", "shares", "units", "size", "volume", "contracts", "basesize", "amount"});
  a.price = amount_arg(args, {"limitprice", "price", "limit", "stopprice", "triggerprice", "stoplimitprice"});
  a.value = amount_arg(args, {"notional", "notionalvalue", "ordervalue", "value", "total", "cost", "quotesize",
                              "quoteamount", "dollaramount", "dollars", "usdamount", "cashamount"});
  if (!a.value && a.quantity && a.price && std::isfinite(*a.quantity * *a.price)) a.value = *a.quantity * *a.price;
}

void read_money(FinanceAction& a, const nlohmann::json& args) {
  a.value = amount_arg(args, {"amount", "value", "sum", "total", "notional", "quantity", "qty"});
  a.symbol = text_arg(args, {"currency", "asset", "coin", "symbol", "token"});
  std::string dir = text_arg(args, {"direction", "type", "transfertype"});
  for (char& c : dir) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (a.kind == FinanceActionKind::Transfer &&
      (dir == "in" || dir == "incoming" || dir == "inbound" || dir == "deposit"))
    a.kind = FinanceActionKind::Deposit;
}

std::string with_value(std::string_view what, double v, std::string_view limit_name, double limit) {
  return std::string(what) + " " + format_finance_amount(v) + " is over " + std::string(limit_name) + " " +
         format_finance_amount(limit);
}

// Days since 1970-01-01 of a civil date, and back (H. Hinnant's algorithms).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

int64_t year_of_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return static_cast<int64_t>(yoe) + era * 400 + (m <= 2);
}

// 0 Sunday .. 6 Saturday.
unsigned weekday_of(int64_t days) { return static_cast<unsigned>(((days % 7 + 7) % 7 + 4) % 7); }

// The day of the n-th Sunday of a month.
int64_t nth_sunday(int64_t year, unsigned month, unsigned n) {
  const int64_t first = days_from_civil(year, month, 1);
  return first + (7 - weekday_of(first)) % 7 + 7 * (n - 1);
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// New York's offset from UTC in seconds at a Unix time: EDT (-4 h) from
// 02:00 EST of the second Sunday of March (07:00 UTC) to 02:00 EDT of the
// first Sunday of November (06:00 UTC), else EST (-5 h). The rule since 2007.
int64_t new_york_offset(int64_t unix_s) {
  const int64_t year = year_of_days(floor_div(unix_s, 86400));
  const int64_t dst_start = nth_sunday(year, 3, 2) * 86400 + 7 * 3600;
  const int64_t dst_end = nth_sunday(year, 11, 1) * 86400 + 6 * 3600;
  return unix_s >= dst_start && unix_s < dst_end ? -4 * 3600 : -5 * 3600;
}

}  // namespace mcp_finance_detail

using namespace mcp_finance_detail;

std::string_view finance_action_name(FinanceActionKind k) {
  switch (k) {
    case FinanceActionKind::None:
      return "none";
    case FinanceActionKind::OrderPlace:
      return "order_place";
    case FinanceActionKind::OrderCancel:
      return "order_cancel";
    case FinanceActionKind::OrderModify:
      return "order_modify";
    case FinanceActionKind::Transfer:
      return "transfer";
    case FinanceActionKind::Withdraw:
      return "withdraw";
    case FinanceActionKind::Deposit:
      return "deposit";
    case FinanceActionKind::AccountSetting:
      return "account_setting";
  }
  return "none";
}

std::string FinanceAction::describe() const {
  std::string s(finance_action_name(kind));
  if (!setting.empty()) s += " setting=" + setting;
  if (!symbol.empty()) s += " symbol=" + symbol;
  if (!side.empty()) s += " side=" + side;
  if (quantity) s += " qty=" + format_finance_amount(*quantity);
  if (price) s += " price=" + format_finance_amount(*price);
  if (value) s += " value=" + format_finance_amount(*value);
  return s;
}

FinanceAction classify_finance_action(std::string_view tool, const nlohmann::json* arguments) {
  FinanceAction a;
  const Words w = split_words(tool);
  a.kind = kind_of(w, a.setting);
  const bool has_args = arguments != nullptr && arguments->is_object();
  switch (a.kind) {
    case FinanceActionKind::OrderPlace:
    case FinanceActionKind::OrderModify:
      if (has_args) read_order(a, *arguments);
      a.side = side_of(w, has_args ? arguments : nullptr);
      break;
    case FinanceActionKind::OrderCancel:
      if (has_args) a.symbol = text_arg(*arguments, {"symbol", "ticker"});
      break;
    case FinanceActionKind::Transfer:
    case FinanceActionKind::Withdraw:
    case FinanceActionKind::Deposit:
      if (has_args) read_money(a, *arguments);
      break;
    case FinanceActionKind::None:
    case FinanceActionKind::AccountSetting:
      break;
  }
  return a;
}

FinanceLimits finance_pack_defaults() {
  FinanceLimits l;
  l.max_order_value = 10000;
  l.approve_over = 1000;
  l.daily_limit = 50000;
  l.max_orders_per_hour = 20;
  l.outlier_factor = 5;
  l.deny_account_danger = true;
  l.market_hours = true;
  return l;
}

FinanceVerdict judge_finance(const FinanceAction& a, const FinanceLimits& l, const FinanceHistory& h,
                             std::chrono::system_clock::time_point now) {
  using K = FinanceActionKind;
  const auto deny = [](std::string rule, std::string reason) {
    return FinanceVerdict{GuardVerdict::Deny, std::move(rule), std::move(reason)};
  };
  const auto hold = [](std::string rule, std::string reason) {
    return FinanceVerdict{GuardVerdict::Approve, std::move(rule), std::move(reason)};
  };
  if (l.deny_account_danger) {
    if (a.kind == K::Withdraw) return deny("account_danger", "a withdrawal");
    if (a.kind == K::Transfer) return deny("account_danger", "money moved out of the account");
    if (a.kind == K::AccountSetting) return deny("account_danger", "a change of the account's " + a.setting);
  }
  if (!a.is_order()) return {};
  const bool placed = a.kind == K::OrderPlace;
  if (l.max_order_value && a.value && *a.value > *l.max_order_value)
    return deny("max_order_value", with_value("the order's value", *a.value, "the cap", *l.max_order_value));
  if (placed && l.daily_limit && a.value && h.day_total + *a.value > *l.daily_limit)
    return deny("daily_limit", with_value("today's orders (UTC) with this one", h.day_total + *a.value,
                                          "the daily limit", *l.daily_limit));
  if (placed && l.max_orders_per_hour && h.orders_last_hour >= *l.max_orders_per_hour)
    return deny("max_orders_per_hour", std::to_string(h.orders_last_hour) + " orders in the last hour, at most " +
                                           std::to_string(*l.max_orders_per_hour));
  if (placed && l.caps_value() && !a.value)
    return hold("order_value_unknown",
                "the order's value is not in its arguments (no notional, or no quantity and "
                "limit price)");
  if (l.approve_over && a.value && *a.value > *l.approve_over)
    return hold("approve_over", with_value("the order's value", *a.value, "the approval threshold", *l.approve_over));
  if (placed && l.outlier_factor && a.value && h.session_values.size() >= kFinanceOutlierMinOrders) {
    const double median = finance_median(h.session_values);
    if (*a.value > *l.outlier_factor * median)
      return hold("outlier", "the order's value " + format_finance_amount(*a.value) + " is over " +
                                 format_finance_amount(*l.outlier_factor) + " x the median " +
                                 format_finance_amount(median) + " of this session's " +
                                 std::to_string(h.session_values.size()) + " orders");
  }
  if (l.market_hours && !nyse_regular_hours(now))
    return hold("market_hours", "outside NYSE regular hours (09:30-16:00 America/New_York, Monday to Friday)");
  return {};
}

bool nyse_regular_hours(std::chrono::system_clock::time_point t) {
  const int64_t unix_s = std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  const int64_t local = unix_s + new_york_offset(unix_s);
  const int64_t day = floor_div(local, 86400);
  const int64_t second = local - day * 86400;
  const unsigned wd = weekday_of(day);
  return wd >= 1 && wd <= 5 && second >= 9 * 3600 + 30 * 60 && second < 16 * 3600;
}

double finance_median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::optional<double> parse_finance_amount(std::string_view text) {
  std::string t;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 0 && text[i] == '$') continue;
    if (text[i] != ',') t += text[i];
  }
  if (t.empty() || t.size() > 32 || t.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(d) || d < 0) return std::nullopt;
  return d;
}

std::string format_finance_amount(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (s.ends_with('0')) s.pop_back();
  if (s.ends_with('.')) s.pop_back();
  return s;
}

}  // namespace faultline
