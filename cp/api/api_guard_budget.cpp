// The LLM budget shared by every guard of an identity (--llm-budget-shared):
// a guard reserves a call's ceiling before it forwards the call, and settles
// the reservation to what the call was billed (or releases it) when it ends.
// Each reservation is one transaction (Store::reserve_guard_budget), so guards
// reserving at once, through one faultcp or several replicas, cannot overshoot.
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "userspace/guard/llm_budget.h"

namespace faultline::cp {
namespace guard_budget_detail {

constexpr size_t kMaxBudgetIdentity = 256;
constexpr int64_t kMaxBudgetWindowS = 366LL * 86400;      // a year
constexpr int64_t kMaxBudgetCount = 1'000'000'000'000LL;  // the guard's own flag caps

const std::vector<FieldRule> kReserveFields = {
    {"identity", JsonType::String, true}, {"window_s", JsonType::Integer, true}, {"tokens", JsonType::Integer, true},
    {"token_limit", JsonType::Integer},   {"request_limit", JsonType::Integer},
};
const std::vector<FieldRule> kSettleFields = {{"reservation", JsonType::Integer, true},
                                              {"output", JsonType::Integer, true}};
const std::vector<FieldRule> kReleaseFields = {{"reservation", JsonType::Integer, true}};

// A count field within [lo, kMaxBudgetCount]; the error names it.
std::optional<HttpReply> check_count(const nlohmann::json& j, const char* field, int64_t lo, int64_t hi) {
  if (!j.contains(field)) return std::nullopt;
  if (!j[field].is_number_integer() || j[field].get<int64_t>() < lo || j[field].get<int64_t>() > hi)
    return ApiError{400, field, "must be " + std::to_string(lo) + "-" + std::to_string(hi)}.reply();
  return std::nullopt;
}

nlohmann::json charge_json(const GuardBudgetCharge& c) {
  return {{"window_start", c.window_start}, {"tokens", c.tokens}, {"requests", c.requests}};
}

}  // namespace guard_budget_detail

using namespace guard_budget_detail;

HttpReply ControlPlane::reserve_guard_budget(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kReserveFields)) return e->reply();
  const std::string identity = j["identity"].get<std::string>();
  if (identity.empty() || identity.size() > kMaxBudgetIdentity)
    return ApiError{400, "identity", "must be 1-256 characters"}.reply();
  for (auto [field, lo, hi] : {std::tuple<const char*, int64_t, int64_t>{"window_s", 1, kMaxBudgetWindowS},
                               {"tokens", 0, kMaxBudgetCount},
                               {"token_limit", 1, kMaxBudgetCount},
                               {"request_limit", 1, kMaxBudgetCount}})
    if (auto e = check_count(j, field, lo, hi)) return *e;
  if (!j.contains("token_limit") && !j.contains("request_limit"))
    return api_error(400, "token_limit or request_limit: a budget needs at least one limit", "token_limit");
  const int64_t window_s = j["window_s"].get<int64_t>();
  const int64_t tokens = j["tokens"].get<int64_t>();
  std::optional<int64_t> token_limit, request_limit;
  if (j.contains("token_limit")) token_limit = j["token_limit"].get<int64_t>();
  if (j.contains("request_limit")) request_limit = j["request_limit"].get<int64_t>();
  auto r = store_.reserve_guard_budget(p.workspace_id, identity, window_s, tokens, token_limit, request_limit, now_ms(),
                                       p.actor());
  if (!r) return storage_error(r.error());
  nlohmann::json out = charge_json(r->charge);
  out["admitted"] = r->admitted;
  out["reservation"] = r->admitted ? nlohmann::json(r->id) : nlohmann::json(nullptr);
  if (!r->admitted) {
    const bool requests = r->refused == "requests";
    out["refused"] = r->refused;
    out["reason"] =
        budget_refusal_reason(r->refused, static_cast<uint64_t>(requests ? r->charge.requests : r->charge.tokens),
                              static_cast<uint64_t>(requests ? *request_limit : *token_limit),
                              std::chrono::seconds(window_s), static_cast<uint64_t>(tokens));
  }
  return api_json(200, out);
}

HttpReply ControlPlane::end_guard_budget(const HttpRequest& req, const Principal& p, bool settle) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, settle ? kSettleFields : kReleaseFields)) return e->reply();
  if (auto e = check_count(j, "reservation", 1, INT64_MAX)) return *e;
  if (auto e = check_count(j, "output", 0, kMaxBudgetCount)) return *e;
  std::optional<int64_t> billed;
  if (settle) billed = j["output"].get<int64_t>();
  auto r = store_.end_guard_budget_reservation(p.workspace_id, j["reservation"].get<int64_t>(), billed);
  if (!r) return storage_error(r.error());
  // false: settled or released already, or its window is over (a guard's
  // retry of a call that reached faultcp is answered the same way).
  return api_json(200, {{settle ? "settled" : "released", *r}});
}

HttpReply ControlPlane::get_guard_budget(const HttpRequest& req, const Principal& p) {
  auto identity = req.query_param("identity");
  if (!identity || identity->empty() || identity->size() > kMaxBudgetIdentity)
    return api_error(400, "identity: required, 1-256 characters", "identity");
  auto w = req.query_param("window_s");
  int64_t window_s = 0;
  if (!w || w->empty() || w->size() > 9 || w->find_first_not_of("0123456789") != std::string::npos ||
      (window_s = std::stoll(std::string(*w))) < 1 || window_s > kMaxBudgetWindowS)
    return api_error(400, "window_s: required, whole seconds 1-31622400", "window_s");
  auto c = store_.guard_budget(p.workspace_id, std::string(*identity), window_s, now_ms());
  if (!c) return storage_error(c.error());
  nlohmann::json out = charge_json(*c);
  out["identity"] = *identity;
  out["window_s"] = window_s;
  return api_json(200, out);
}

}  // namespace faultline::cp
