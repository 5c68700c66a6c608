// Budgets: counters per identity and fixed window under one mutex (a decision
// is a few additions, so contention is short), the state file as one JSON
// object written whole and renamed over the old one.
#include "userspace/guard/llm_budget.h"

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/units.h"

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace llm_budget_detail {

using Json = nlohmann::json;

std::string format_window(std::chrono::seconds w) {
  const int64_t s = w.count();
  if (s % 86400 == 0) return std::to_string(s / 86400) + "d";
  if (s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace llm_budget_detail

std::string budget_refusal_reason(std::string_view which, uint64_t used, uint64_t limit, std::chrono::seconds window,
                                  uint64_t asked) {
  const std::string per = " per " + llm_budget_detail::format_window(window);
  if (which == "requests")
    return "LLM request budget exhausted: " + std::to_string(used) + " of " + std::to_string(limit) + " calls" + per +
           " used";
  return "LLM token budget exhausted: " + std::to_string(used) + " of " + std::to_string(limit) + " output tokens" +
         per + " used or reserved, this call may use " + std::to_string(asked);
}

Result<std::chrono::seconds> parse_budget_window(std::string_view text) {
  const std::string t(text);
  uint64_t seconds = 0;
  if (!t.empty() && t.back() == 'd' && t.size() > 1 && t.find_first_not_of("0123456789") == t.size() - 1 &&
      t.size() < 8) {
    seconds = std::stoull(t.substr(0, t.size() - 1)) * 86400;
  } else {
    auto ns = parse_duration_ns(t);
    if (!ns) return input_error(EINVAL, "--llm-budget-window '" + t + "': " + ns.error().message);
    if (ns.value() % 1'000'000'000 != 0)
      return input_error(EINVAL, "--llm-budget-window '" + t + "': whole seconds only (1h, 30m, 1d)");
    seconds = ns.value() / 1'000'000'000;
  }
  if (seconds == 0) return input_error(EINVAL, "--llm-budget-window '" + t + "': at least 1s");
  return std::chrono::seconds(static_cast<int64_t>(seconds));
}

uint64_t budget_ceiling(const LlmRequestFacts& facts, const LlmBudgetLimits& limits) {
  return facts.max_tokens.value_or(limits.default_reserve);
}

LocalBudgetStore::LocalBudgetStore(LlmBudgetLimits limits, std::string state_dir, Clock clock,
                                   std::chrono::milliseconds save_interval)
    : limits_(std::move(limits)),
      state_dir_(std::move(state_dir)),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::system_clock::now(); })),
      save_interval_(save_interval) {}

Result<std::unique_ptr<LocalBudgetStore>> LocalBudgetStore::open(LlmBudgetLimits limits, std::string state_dir,
                                                                 Clock clock, std::chrono::milliseconds save_interval) {
  if (limits.window.count() < 1) return input_error(EINVAL, "--llm-budget-window: at least 1s");
  std::unique_ptr<LocalBudgetStore> store(
      new LocalBudgetStore(std::move(limits), std::move(state_dir), std::move(clock), save_interval));
  if (!store->state_dir_.empty()) {
    if (auto st = store->load(); !st) return st.error();
  }
  return store;
}

LocalBudgetStore::~LocalBudgetStore() {
  std::lock_guard lock(mu_);
  if (dirty_) (void)save_locked();  // nothing to tell anyone on the way out
}

std::string LocalBudgetStore::state_path() const {
  return state_dir_.empty() ? std::string() : state_dir_ + "/" + std::string(kStateFile);
}

int64_t LocalBudgetStore::window_start(std::chrono::system_clock::time_point t) const {
  const int64_t s = std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  const int64_t w = limits_.window.count();
  return llm_budget_detail::floor_div(s, w) * w;
}

BudgetCharge& LocalBudgetStore::current(const std::string& identity, int64_t window) {
  BudgetCharge& c = charges_[identity];
  if (c.window_start != window) c = BudgetCharge{window, 0, 0};  // a new window starts empty
  return c;
}

void LocalBudgetStore::changed() {
  dirty_ = true;
  if (state_dir_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_save_ < save_interval_) return;
  (void)save_locked();  // a failed save is tried again at the next change; the counters stay right in memory
}

Result<BudgetAdmission> LocalBudgetStore::reserve(const std::string& identity, uint64_t tokens) {
  const int64_t window = window_start(clock_());
  std::lock_guard lock(mu_);
  BudgetCharge& c = current(identity, window);
  BudgetAdmission a;
  if (limits_.requests && c.requests + 1 > *limits_.requests) {
    a.reason = budget_refusal_reason("requests", c.requests, *limits_.requests, limits_.window, tokens);
    return a;
  }
  if (limits_.tokens && (tokens > *limits_.tokens || c.tokens > *limits_.tokens - tokens)) {
    a.reason = budget_refusal_reason("tokens", c.tokens, *limits_.tokens, limits_.window, tokens);
    return a;
  }
  c.tokens += tokens;
  c.requests += 1;
  a.admitted = true;
  a.reservation = BudgetReservation{++next_id_, identity, window, tokens};
  open_.emplace(a.reservation.id, a.reservation);
  changed();
  return a;
}

bool LocalBudgetStore::settle(const BudgetReservation& r, uint64_t billed_output) {
  std::lock_guard lock(mu_);
  if (open_.erase(r.id) == 0) return false;
  auto it = charges_.find(r.identity);
  if (it == charges_.end() || it->second.window_start != r.window_start) return false;
  BudgetCharge& c = it->second;
  c.tokens = (c.tokens >= r.tokens ? c.tokens - r.tokens : 0) + billed_output;
  changed();
  return true;
}

bool LocalBudgetStore::release(const BudgetReservation& r) {
  std::lock_guard lock(mu_);
  if (open_.erase(r.id) == 0) return false;
  auto it = charges_.find(r.identity);
  if (it == charges_.end() || it->second.window_start != r.window_start) return false;
  BudgetCharge& c = it->second;
  c.tokens = c.tokens >= r.tokens ? c.tokens - r.tokens : 0;
  c.requests = c.requests > 0 ? c.requests - 1 : 0;
  changed();
  return true;
}

BudgetCharge LocalBudgetStore::charged(const std::string& identity) {
  const int64_t window = window_start(clock_());
  std::lock_guard lock(mu_);
  auto it = charges_.find(identity);
  if (it == charges_.end() || it->second.window_start != window) return BudgetCharge{window, 0, 0};
  return it->second;
}

Status LocalBudgetStore::flush() {
  std::lock_guard lock(mu_);
  return save_locked();
}

Status LocalBudgetStore::save_locked() {
  if (state_dir_.empty()) return {};
  const int64_t window = window_start(clock_());
  llm_budget_detail::Json ids = llm_budget_detail::Json::object();
  for (const auto& [id, c] : charges_) {
    if (c.window_start != window) continue;  // a past window is over: nothing to keep
    ids[id] = {{"window_start", c.window_start}, {"tokens", c.tokens}, {"requests", c.requests}};
  }
  const llm_budget_detail::Json doc = {{"version", 1}, {"window_s", limits_.window.count()}, {"identities", ids}};
  if (auto st = write_file_atomic(state_path(),
                                  doc.dump(-1, ' ', false, llm_budget_detail::Json::error_handler_t::replace) + "\n");
      !st) {
    return st.error();
  }
  dirty_ = false;
  last_save_ = std::chrono::steady_clock::now();
  return {};
}

Status LocalBudgetStore::load() {
  using llm_budget_detail::Json;
  const std::string path = state_path();
  auto text = read_text_file(path);
  if (!text) {
    if (text.error().err == ENOENT) return {};  // a first start
    return text.error();
  }
  const Json doc = Json::parse(text.value(), nullptr, false);
  const auto bad = [&](const std::string& why) {
    return input_error(EINVAL, path + ": " + why + " (move the file aside to start the budgets afresh)");
  };
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  if (doc.value("version", 0) != 1) return bad("unknown version");
  const auto ws = doc.find("window_s");
  if (ws == doc.end() || !ws->is_number_integer()) return bad("no window_s");
  if (ws->get<int64_t>() != limits_.window.count()) return {};  // another window length: its counters do not apply
  const auto ids = doc.find("identities");
  if (ids == doc.end() || !ids->is_object()) return bad("no identities");
  for (const auto& [id, v] : ids->items()) {
    if (!v.is_object() || !v.contains("window_start") || !v.contains("tokens") || !v.contains("requests") ||
        !v["window_start"].is_number_integer() || !v["tokens"].is_number_unsigned() ||
        !v["requests"].is_number_unsigned()) {
      return bad("identity '" + id + "': expected window_start, tokens and requests");
    }
    charges_[id] =
        BudgetCharge{v["window_start"].get<int64_t>(), v["tokens"].get<uint64_t>(), v["requests"].get<uint64_t>()};
  }
  return {};
}

}  // namespace faultline
