// LLM budgets per identity: output tokens and calls per fixed window, by
// reserve-then-settle so parallel calls cannot overshoot; a local store whose
// window state survives a restart, behind an interface a shared one implements.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/result.h"
#include "userspace/guard/llm_request_scan.h"

namespace faultline {

// What a budget counts, per identity and window:
//   tokens    output tokens (LlmUsage::output: what the providers bill as
//             output, reasoning included). Input tokens are logged, not
//             charged: admission can bound a call's output (its max tokens),
//             never its input, and a budget that cannot be bounded at
//             admission could not stop parallel calls from overshooting.
//   requests  calls admitted.
// Windows are fixed and aligned to the Unix epoch (a 1h window runs from one
// full hour to the next, UTC): every guard of an identity agrees on the
// window without talking, which a shared store needs, and the state is one
// counter pair per identity rather than one entry per call.
struct LlmBudgetLimits {
  std::optional<uint64_t> tokens;     // --llm-token-budget N
  std::optional<uint64_t> requests;   // --llm-request-budget N
  std::chrono::seconds window{3600};  // --llm-budget-window D (whole seconds, at least 1)
  uint64_t default_reserve = 4096;    // --llm-default-reserve: a call that names no max tokens
};

// "1h", "30m", "7d" (days accepted here), "90s": whole seconds, at least one.
[[nodiscard]] Result<std::chrono::seconds> parse_budget_window(std::string_view text);

// What admission reserves for a call: its max tokens, else the default reserve.
[[nodiscard]] uint64_t budget_ceiling(const LlmRequestFacts& facts, const LlmBudgetLimits& limits);

// Why a call does not fit, in the words of the budget's denial: `which` is
// "requests" or "tokens", `used` what the window holds (reservations
// included), `limit` the budget, `asked` what this call would reserve. One
// wording for the local store and faultcp's shared one.
[[nodiscard]] std::string budget_refusal_reason(std::string_view which, uint64_t used, uint64_t limit,
                                                std::chrono::seconds window, uint64_t asked);

// A reservation held by an admitted call, to settle or release later.
struct BudgetReservation {
  uint64_t id = 0;
  std::string identity;
  int64_t window_start = 0;  // Unix seconds: the window it was charged to
  uint64_t tokens = 0;       // what was reserved
};

struct BudgetAdmission {
  bool admitted = false;
  BudgetReservation reservation;  // admitted only
  std::string reason;             // refused only: which budget and its numbers, for the denial
};

// What an identity has used in the current window (open reservations included).
struct BudgetCharge {
  int64_t window_start = 0;
  uint64_t tokens = 0;
  uint64_t requests = 0;
};

// Where budgets are kept. Thread-safe: calls come from every relay worker.
// The local store is LocalBudgetStore; a store shared by every guard of an
// identity (through faultcp, --llm-budget-shared) implements the same calls.
//
// The call's life: reserve() at admission (refused: deny with
// DenialCause::Budget); then exactly one of
//   settle(r, usage.output)  the answer reported usage (a cut stream: its last usage)
//   release(r)               the call never reached the upstream (denied later,
//                            held and refused, the connection failed first)
//   nothing                  no usage ever came: the reservation stays charged
// A second settle or release of the same reservation does nothing.
class BudgetStore {
 public:
  virtual ~BudgetStore() = default;
  [[nodiscard]] virtual Result<BudgetAdmission> reserve(const std::string& identity, uint64_t tokens) = 0;
  // The reservation is replaced by what the call was billed; false when it was
  // already settled or released (or its window is over: nothing to correct).
  virtual bool settle(const BudgetReservation& reservation, uint64_t billed_output) = 0;
  // The reservation and its request are given back.
  virtual bool release(const BudgetReservation& reservation) = 0;
  [[nodiscard]] virtual BudgetCharge charged(const std::string& identity) = 0;
  // True when reserve() waits on the network (faultcp's shared store): the
  // judge then holds the call and reserves on a thread of its own, never on
  // the proxy's worker.
  [[nodiscard]] virtual bool waits() const { return false; }
};

// The budgets of one guard process, in memory under a mutex, saved to
// <state_dir>/llm-budget.json (a sibling written, fsynced and renamed over
// it) at most once per save_interval while it changes, and at flush() and
// destruction: a crash forgets at most the last interval's charges. Loaded at
// open(); a file written with another window length is ignored (the windows
// no longer line up), a corrupt one refused (move it aside).
class LocalBudgetStore final : public BudgetStore {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;

  // state_dir "" keeps nothing on disk. clock: the system clock unless given.
  [[nodiscard]] static Result<std::unique_ptr<LocalBudgetStore>> open(
      LlmBudgetLimits limits, std::string state_dir, Clock clock = {},
      std::chrono::milliseconds save_interval = std::chrono::seconds(1));
  ~LocalBudgetStore() override;
  LocalBudgetStore(const LocalBudgetStore&) = delete;
  LocalBudgetStore& operator=(const LocalBudgetStore&) = delete;

  [[nodiscard]] Result<BudgetAdmission> reserve(const std::string& identity, uint64_t tokens) override;
  bool settle(const BudgetReservation& reservation, uint64_t billed_output) override;
  bool release(const BudgetReservation& reservation) override;
  [[nodiscard]] BudgetCharge charged(const std::string& identity) override;

  // Writes the state now (no-op without a state dir).
  [[nodiscard]] Status flush();
  [[nodiscard]] std::string state_path() const;

  static constexpr std::string_view kStateFile = "llm-budget.json";

 private:
  LocalBudgetStore(LlmBudgetLimits limits, std::string state_dir, Clock clock, std::chrono::milliseconds save_interval);
  [[nodiscard]] int64_t window_start(std::chrono::system_clock::time_point t) const;
  BudgetCharge& current(const std::string& identity, int64_t window);  // mu_ held
  void changed();                                                      // mu_ held
  [[nodiscard]] Status save_locked();                                  // mu_ held
  [[nodiscard]] Status load();

  LlmBudgetLimits limits_;
  std::string state_dir_;
  Clock clock_;
  std::chrono::milliseconds save_interval_;
  std::mutex mu_;
  std::unordered_map<std::string, BudgetCharge> charges_;
  std::map<uint64_t, BudgetReservation> open_;  // reserved, not yet settled or released
  uint64_t next_id_ = 0;
  bool dirty_ = false;
  std::chrono::steady_clock::time_point last_save_{};
};

}  // namespace faultline
