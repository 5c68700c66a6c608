// --llm-budget-shared: the LLM budget kept by faultcp, one for every guard of
// an identity in the workspace (docs/guard.md, "The shared budget").
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "userspace/guard/llm_budget.h"
#include "userspace/guard/task_thread.h"
#include "userspace/guard_runtime/cp_link.h"

namespace faultline {

// reserve() is one round trip to faultcp (POST /v1/guardrails/budget/reserve),
// which admits or refuses in one transaction; it fails (so the judge's
// enforce denies, saying why) when faultcp cannot be asked. settle() and
// release() are queued and sent by a thread of their own, so the proxy's
// worker that reads the answer never waits; one that cannot be delivered
// after a few tries leaves the reservation charged in faultcp (the fail-safe
// side) and says so on the log.
class RemoteBudgetStore final : public BudgetStore {
 public:
  RemoteBudgetStore(std::shared_ptr<const CpLink> link, LlmBudgetLimits limits,
                    std::function<void(const std::string&)> log);
  ~RemoteBudgetStore() override = default;  // the sender delivers what is queued first

  [[nodiscard]] Result<BudgetAdmission> reserve(const std::string& identity, uint64_t tokens) override;
  bool settle(const BudgetReservation& reservation, uint64_t billed_output) override;
  bool release(const BudgetReservation& reservation) override;
  // The window's charge in faultcp; zero when it cannot be read (fetch() says why).
  [[nodiscard]] BudgetCharge charged(const std::string& identity) override;
  [[nodiscard]] bool waits() const override { return true; }

  [[nodiscard]] Result<BudgetCharge> fetch(const std::string& identity) const;

 private:
  // Takes the reservation out of the open set; false if it was not open.
  bool take_open(uint64_t id);
  void send_end(const BudgetReservation& r, std::optional<uint64_t> billed);

  std::shared_ptr<const CpLink> link_;
  LlmBudgetLimits limits_;
  std::function<void(const std::string&)> log_;
  std::mutex mu_;
  std::set<uint64_t> open_;  // faultcp's reservation ids not yet settled or released
  TaskThread sender_;        // last: its tasks use the members above
};

}  // namespace faultline
