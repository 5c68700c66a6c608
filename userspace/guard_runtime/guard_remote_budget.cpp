// The shared LLM budget's client: faultcp's budget routes behind BudgetStore.
#include "userspace/guard_runtime/guard_remote_budget.h"

#include <cctype>
#include <chrono>
#include <thread>

namespace faultline {
namespace remote_budget_detail {

constexpr uint64_t kReserveTimeoutMs = 5'000;
constexpr int kEndTries = 3;

std::string url_word(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace remote_budget_detail

using namespace remote_budget_detail;

RemoteBudgetStore::RemoteBudgetStore(std::shared_ptr<const CpLink> link, LlmBudgetLimits limits,
                                     std::function<void(const std::string&)> log)
    : link_(std::move(link)), limits_(std::move(limits)), log_(std::move(log)) {}

Result<BudgetAdmission> RemoteBudgetStore::reserve(const std::string& identity, uint64_t tokens) {
  nlohmann::json body = {{"identity", identity}, {"window_s", limits_.window.count()}, {"tokens", tokens}};
  if (limits_.tokens) body["token_limit"] = *limits_.tokens;
  if (limits_.requests) body["request_limit"] = *limits_.requests;
  auto a = link_->call("POST", "/v1/guardrails/budget/reserve", body.dump(), "application/json", kReserveTimeoutMs);
  const auto fail = [&](const std::string& why) {
    // The transport's errno is in answer_problem()'s text already.
    return make_error(
        0, "the shared budget (--llm-budget-shared) could not be asked at faultcp " + link_->text() + ": " + why);
  };
  if (!a || a->response.status.code != 200) return fail(answer_problem(a));
  auto j = answer_object(*a);
  if (!j || !j->contains("admitted") || !(*j)["admitted"].is_boolean()) return fail("an answer without admitted");
  BudgetAdmission out;
  if (!(*j)["admitted"].get<bool>()) {
    out.reason = j->value("reason", std::string("refused by faultcp")) + " (shared through faultcp)";
    return out;
  }
  const auto& id = (*j)["reservation"];
  if (!id.is_number_unsigned()) return fail("an admission without its reservation");
  out.admitted = true;
  out.reservation = BudgetReservation{id.get<uint64_t>(), identity, j->value("window_start", int64_t{0}), tokens};
  std::lock_guard lock(mu_);
  open_.insert(out.reservation.id);
  return out;
}

bool RemoteBudgetStore::take_open(uint64_t id) {
  std::lock_guard lock(mu_);
  return open_.erase(id) == 1;
}

bool RemoteBudgetStore::settle(const BudgetReservation& r, uint64_t billed_output) {
  if (!take_open(r.id)) return false;
  sender_.post([this, r, billed_output] { send_end(r, billed_output); });
  return true;
}

bool RemoteBudgetStore::release(const BudgetReservation& r) {
  if (!take_open(r.id)) return false;
  sender_.post([this, r] { send_end(r, std::nullopt); });
  return true;
}

void RemoteBudgetStore::send_end(const BudgetReservation& r, std::optional<uint64_t> billed) {
  nlohmann::json body = {{"reservation", r.id}};
  if (billed) body["output"] = *billed;
  const std::string path = billed ? "/v1/guardrails/budget/settle" : "/v1/guardrails/budget/release";
  Result<HttpAnswer> a = make_error(0, "not sent");
  for (int i = 0; i < kEndTries; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250 * i));
    a = link_->call("POST", path, body.dump(), "application/json", kReserveTimeoutMs);
    // 200 whether or not it was still open (a retry of a delivered one is harmless); 4xx will not change.
    if (a && a->response.status.code < 500) break;
  }
  if (a && a->response.status.code == 200) return;
  if (log_)
    log_("faultline guard: the shared LLM budget: " + std::string(billed ? "settling" : "releasing") + " reservation " +
         std::to_string(r.id) + " at faultcp failed (" + answer_problem(a) + "): it stays charged at its " +
         std::to_string(r.tokens) + " tokens until its window ends");
}

Result<BudgetCharge> RemoteBudgetStore::fetch(const std::string& identity) const {
  auto a = link_->call(
      "GET",
      "/v1/guardrails/budget?identity=" + url_word(identity) + "&window_s=" + std::to_string(limits_.window.count()),
      "", "application/json", kReserveTimeoutMs);
  if (!a || a->response.status.code != 200) return make_error(0, answer_problem(a));
  auto j = answer_object(*a);
  if (!j) return make_error(EPROTO, "faultcp's budget answer is not a JSON object");
  return BudgetCharge{j->value("window_start", int64_t{0}), j->value("tokens", uint64_t{0}),
                      j->value("requests", uint64_t{0})};
}

BudgetCharge RemoteBudgetStore::charged(const std::string& identity) {
  auto c = fetch(identity);
  return c ? *c : BudgetCharge{};
}

}  // namespace faultline
