// The finance pack's ledger: the orders one MCP server was sent, kept in the
// guard's state folder (like the LLM budgets' state), so a restart of the
// guard does not reset the UTC day's total or the last hour's count.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/guard/mcp_finance.h"

namespace faultline {

// <state_dir>/mcp-finance-<server>.json (a server name is letters, digits and "-_.@").
[[nodiscard]] std::string mcp_finance_file(const std::string& state_dir, const std::string& server);

// The file: {"version":1,"day":D,"day_total":X,"orders":[unix ms, ...]}: D the
// UTC day (days since 1970-01-01) whose orders sum to X, the times of the
// orders of the last hour. Each order read-modify-writes it under an flock of
// FILE.lock and renames a fsynced sibling over it, so two guards of the same
// server add up, and a crash loses nothing recorded. This session's order
// values (the outlier test's median) are memory only.
class FinanceLedger {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;

  // path "" keeps nothing on disk. A file that is not the ledger is refused
  // (its path named: move it aside). clock: the system clock unless given.
  [[nodiscard]] static Result<std::unique_ptr<FinanceLedger>> open(std::string path, Clock clock = {});
  FinanceLedger(const FinanceLedger&) = delete;
  FinanceLedger& operator=(const FinanceLedger&) = delete;

  [[nodiscard]] std::chrono::system_clock::time_point now() const { return clock_(); }
  // What the limits count at now() (the file read again: another guard's orders too).
  [[nodiscard]] FinanceHistory history();
  // An order sent to the server: its value (when known) added to the day's
  // total and this session's values, its time to the hour's count.
  [[nodiscard]] Status record(const FinanceAction& order);
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  struct State {
    int64_t day = 0;
    double day_total = 0;
    std::vector<int64_t> orders_ms;
  };
  FinanceLedger(std::string path, Clock clock) : path_(std::move(path)), clock_(std::move(clock)) {}
  [[nodiscard]] Result<State> read_file() const;
  [[nodiscard]] State current(State s) const;  // a past day's total and orders older than an hour dropped

  std::string path_;
  Clock clock_;
  std::mutex mu_;
  State state_;
  std::vector<double> session_values_;
};

}  // namespace faultline
