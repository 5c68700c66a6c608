// The finance ledger's file: one small JSON object, read again before each
// judgement and read-modify-written under an flock for each order.
#include "userspace/guard/mcp_finance_ledger.h"

#include <fcntl.h>
#include <sys/file.h>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/unique_fd.h"

namespace faultline {
namespace mcp_finance_ledger_detail {

int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

int64_t utc_day(int64_t ms) { return ms / 86'400'000 - ((ms % 86'400'000 != 0) && ms < 0); }

constexpr int64_t kHourMs = 3'600'000;

}  // namespace mcp_finance_ledger_detail

using namespace mcp_finance_ledger_detail;

std::string mcp_finance_file(const std::string& state_dir, const std::string& server) {
  return state_dir + "/mcp-finance-" + server + ".json";
}

Result<std::unique_ptr<FinanceLedger>> FinanceLedger::open(std::string path, Clock clock) {
  if (!clock) clock = [] { return std::chrono::system_clock::now(); };
  std::unique_ptr<FinanceLedger> l(new FinanceLedger(std::move(path), std::move(clock)));
  auto s = l->read_file();
  if (!s) return s.error();
  l->state_ = l->current(std::move(*s));
  return l;
}

Result<FinanceLedger::State> FinanceLedger::read_file() const {
  State s;
  if (path_.empty()) return s;
  auto text = read_text_file(path_);
  if (!text) {
    if (text.error().err == ENOENT) return s;  // no order yet
    return text.error();
  }
  const auto doc = nlohmann::json::parse(*text, nullptr, false);
  const auto bad = [&](const std::string& why) {
    return input_error(EINVAL, path_ + ": " + why + " (move the file aside to start the finance ledger afresh)");
  };
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  if (doc.value("version", 0) != 1) return bad("unknown version");
  if (!doc.contains("day") || !doc["day"].is_number_integer()) return bad("no day");
  if (!doc.contains("day_total") || !doc["day_total"].is_number() || doc["day_total"].get<double>() < 0)
    return bad("no day_total");
  if (!doc.contains("orders") || !doc["orders"].is_array()) return bad("no orders");
  s.day = doc["day"].get<int64_t>();
  s.day_total = doc["day_total"].get<double>();
  for (const auto& o : doc["orders"]) {
    if (!o.is_number_integer()) return bad("orders: a time that is not an integer");
    s.orders_ms.push_back(o.get<int64_t>());
  }
  return s;
}

FinanceLedger::State FinanceLedger::current(State s) const {
  const int64_t now = unix_ms(clock_());
  if (s.day != utc_day(now)) {
    s.day = utc_day(now);
    s.day_total = 0;
  }
  std::erase_if(s.orders_ms, [now](int64_t t) { return t <= now - kHourMs || t > now + kHourMs; });
  return s;
}

FinanceHistory FinanceLedger::history() {
  std::lock_guard lock(mu_);
  // Another guard of the same server may have sent orders since; a file that
  // cannot be read now leaves what this guard knows.
  if (auto s = read_file(); s) state_ = std::move(*s);
  state_ = current(std::move(state_));
  return FinanceHistory{state_.day_total, state_.orders_ms.size(), session_values_};
}

Status FinanceLedger::record(const FinanceAction& order) {
  std::lock_guard lock(mu_);
  const int64_t now = unix_ms(clock_());
  if (order.kind == FinanceActionKind::OrderPlace && order.value) session_values_.push_back(*order.value);
  UniqueFd lock_fd;
  if (!path_.empty()) {
    const std::string lock_path = path_ + ".lock";
    lock_fd = UniqueFd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!lock_fd) return errno_error("cannot open " + lock_path);
    while (::flock(lock_fd.get(), LOCK_EX) != 0)
      if (errno != EINTR) return errno_error("cannot lock " + lock_path);
    auto s = read_file();
    if (!s) return s.error();
    state_ = std::move(*s);
  }
  state_ = current(std::move(state_));
  if (order.kind == FinanceActionKind::OrderPlace) {
    state_.day_total += order.value.value_or(0);
    state_.orders_ms.push_back(now);
  }
  if (path_.empty()) return {};
  const nlohmann::json doc = {
      {"version", 1}, {"day", state_.day}, {"day_total", state_.day_total}, {"orders", state_.orders_ms}};
  return write_file_atomic(path_, doc.dump() + "\n");  // the flock is released as lock_fd closes
}

}  // namespace faultline
