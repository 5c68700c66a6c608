// Denial answers: the JSON is built with nlohmann (a reason may hold quotes or
// any byte), in the providers' field order so a logged body reads like theirs;
// the response bytes come from the proxy's compose_http_response().
#include "userspace/guard/guard_answer.h"

#include <nlohmann/json.hpp>

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace guard_answer_detail {

using OrderedJson = nlohmann::ordered_json;

std::string compact(const OrderedJson& j) { return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace); }

// The one sentence a model client shows its user.
std::string model_message(const Denial& d) {
  std::string m = d.cause == DenialCause::Budget ? "Faultline guard: LLM budget exhausted" : "Faultline guard: denied";
  if (!d.rule.empty()) m += " by rule '" + d.rule + "'";
  if (!d.reason.empty()) m += ": " + d.reason;
  if (!d.request_id.empty()) m += " (request " + d.request_id + ")";
  return m;
}

LlmAnswer plain(const Denial& d) {
  OrderedJson body = {{"error", d.cause == DenialCause::Budget ? "budget exhausted" : "denied by policy"},
                      {"rule", d.rule},
                      {"reason", d.reason},
                      {"request_id", d.request_id}};
  return LlmAnswer{d.cause == DenialCause::Budget ? 429 : 403,
                   {{"Content-Type", "application/json"}, {"x-faultline-request-id", d.request_id}},
                   compact(body)};
}

LlmAnswer anthropic(const Denial& d) {
  const bool budget = d.cause == DenialCause::Budget;
  OrderedJson body = {
      {"type", "error"},
      {"error", {{"type", budget ? "rate_limit_error" : "permission_error"}, {"message", model_message(d)}}},
      {"request_id", d.request_id}};
  return LlmAnswer{budget ? 429 : 403,
                   {{"Content-Type", "application/json"}, {"request-id", d.request_id}, {"x-should-retry", "false"}},
                   compact(body)};
}

LlmAnswer openai(const Denial& d) {
  const bool budget = d.cause == DenialCause::Budget;
  OrderedJson body = {{"error",
                       {{"message", model_message(d)},
                        {"type", budget ? "insufficient_quota" : "permission_error"},
                        {"param", nullptr},
                        {"code", budget ? "insufficient_quota" : "policy_denied"}}}};
  return LlmAnswer{budget ? 429 : 403,
                   {{"Content-Type", "application/json"}, {"x-request-id", d.request_id}, {"x-should-retry", "false"}},
                   compact(body)};
}

// A Kubernetes client's own error: a meta/v1 Status, which kubectl prints as
// "Error from server (Forbidden): MESSAGE" and client libraries raise with
// its reason and code.
// The sentence of a server's own error (Kubernetes, ClickHouse).
std::string server_message(const Denial& d) {
  std::string message =
      d.cause == DenialCause::Budget ? "faultline guard: budget exhausted" : "faultline guard: denied";
  if (!d.rule.empty()) message += " by rule '" + d.rule + "'";
  if (!d.reason.empty()) message += ": " + d.reason;
  if (!d.request_id.empty()) message += " (request " + d.request_id + ")";
  return message;
}

LlmAnswer kubernetes(const Denial& d) {
  const bool budget = d.cause == DenialCause::Budget;
  const std::string message = server_message(d);
  OrderedJson body = {
      {"kind", "Status"},          {"apiVersion", "v1"}, {"metadata", OrderedJson::object()},
      {"status", "Failure"},       {"message", message}, {"reason", budget ? "TooManyRequests" : "Forbidden"},
      {"code", budget ? 429 : 403}};
  return LlmAnswer{budget ? 429 : 403,
                   {{"Content-Type", "application/json"}, {"x-faultline-request-id", d.request_id}},
                   compact(body)};
}

// ClickHouse's own exception text (ACCESS_DENIED, code 497) and the header
// its HTTP clients read the code from, so that a client raises its usual
// server error with the guard's sentence in it.
LlmAnswer clickhouse(const Denial& d) {
  return LlmAnswer{403,
                   {{"Content-Type", "text/plain; charset=UTF-8"},
                    {"X-ClickHouse-Exception-Code", "497"},
                    {"x-faultline-request-id", d.request_id}},
                   "Code: 497. DB::Exception: " + server_message(d) + ". (ACCESS_DENIED)\n"};
}

}  // namespace guard_answer_detail

DenialFormat denial_format_for(LlmProvider provider) {
  return provider == LlmProvider::anthropic ? DenialFormat::Anthropic : DenialFormat::OpenAI;
}

LlmAnswer denial_answer(const Denial& denial, DenialFormat format) {
  switch (format) {
    case DenialFormat::Anthropic:
      return guard_answer_detail::anthropic(denial);
    case DenialFormat::OpenAI:
      return guard_answer_detail::openai(denial);
    case DenialFormat::Kubernetes:
      return guard_answer_detail::kubernetes(denial);
    case DenialFormat::ClickHouse:
      return guard_answer_detail::clickhouse(denial);
    case DenialFormat::Plain:
      break;
  }
  return guard_answer_detail::plain(denial);
}

std::string denial_response(const Denial& denial, DenialFormat format, bool keep_alive) {
  const LlmAnswer a = denial_answer(denial, format);
  return compose_http_response(a.status, a.headers, a.body, keep_alive);
}

}  // namespace faultline
