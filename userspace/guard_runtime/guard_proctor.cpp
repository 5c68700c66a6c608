// The proctor's model call (Anthropic Messages API) and how its answer is read.
#include "userspace/guard_runtime/guard_proctor.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

namespace faultline {
namespace guard_proctor_detail {

constexpr std::string_view kDefaultProctorUrl = "https://api.anthropic.com/v1/messages";
constexpr size_t kMaxProctorReason = 500;

// What the model is told: its room (held requests only, never a deny rule,
// which the guard decides before anything is held) and its answer's shape.
constexpr std::string_view kProctorSystem =
    "You are the proctor of an AI agent's network guard. A rule of the guard's policy held the request below "
    "for a person's approval. You may approve it or deny it on the person's behalf, only when the request clearly "
    "fits or clearly breaks the rule's stated reason; when in any doubt, escalate it to the person. Requests the "
    "policy denies never reach you, and you cannot change a rule. Answer with one JSON object and nothing else: "
    "{\"decision\": \"approve\" | \"deny\" | \"escalate\", \"reason\": \"one short sentence\"}.";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace guard_proctor_detail

using namespace guard_proctor_detail;

Result<std::optional<ProctorConfig>> proctor_config_from_env() {
  ProctorConfig c;
  c.api_key = env("FAULTLINE_PROCTOR_API_KEY");
  if (c.api_key.empty()) {
    for (const char* other : {"FAULTLINE_PROCTOR_MODEL", "FAULTLINE_PROCTOR_URL", "FAULTLINE_PROCTOR_TIMEOUT_MS"})
      if (!env(other).empty())
        return input_error(0,
                           std::string(other) + " is set without FAULTLINE_PROCTOR_API_KEY: the proctor needs its key");
    return std::optional<ProctorConfig>{};
  }
  c.model = env("FAULTLINE_PROCTOR_MODEL");
  if (c.model.empty() || c.model.size() > 256)
    return input_error(0,
                       "FAULTLINE_PROCTOR_MODEL: the proctor's model (1-256 characters) is required with "
                       "FAULTLINE_PROCTOR_API_KEY");
  c.url = env("FAULTLINE_PROCTOR_URL");
  if (c.url.empty()) c.url = std::string(kDefaultProctorUrl);
  if (auto u = parse_http_url(c.url); !u)
    return input_error(0, "FAULTLINE_PROCTOR_URL " + c.url + ": " + u.error().message);
  if (const std::string t = env("FAULTLINE_PROCTOR_TIMEOUT_MS"); !t.empty()) {
    if (t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos || std::stol(t) < 100 ||
        std::stol(t) > 120'000)
      return input_error(0, "FAULTLINE_PROCTOR_TIMEOUT_MS '" + t + "': milliseconds, 100-120000");
    c.timeout = std::chrono::milliseconds(std::stol(t));
  }
  return std::optional<ProctorConfig>(std::move(c));
}

std::string_view proctor_decision_word(ProctorDecision d) {
  switch (d) {
    case ProctorDecision::Approve:
      return "approve";
    case ProctorDecision::Deny:
      return "deny";
    case ProctorDecision::Escalate:
      break;
  }
  return "escalate";
}

std::string proctor_request_body(const ProctorConfig& c, const PendingApproval& p) {
  const nlohmann::json request = {{"identity", p.identity}, {"method", p.method}, {"host", p.host},
                                  {"path", p.path},         {"rule", p.rule},     {"rule_reason", p.reason}};
  const nlohmann::json body = {{"model", c.model},
                               {"max_tokens", 256},
                               {"system", kProctorSystem},
                               {"messages", {{{"role", "user"}, {"content", "The held request:\n" + request.dump()}}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ProctorReview read_proctor_answer(int status, std::string_view body) {
  const auto escalate = [](std::string why) { return ProctorReview{ProctorDecision::Escalate, std::move(why)}; };
  if (status != 200) return escalate("the proctor's model answered HTTP " + std::to_string(status));
  const auto answer = nlohmann::json::parse(body, nullptr, false);
  if (answer.is_discarded() || !answer.is_object() || !answer.contains("content") || !answer["content"].is_array())
    return escalate("the proctor's model answered no Messages API content");
  std::string text;
  for (const auto& block : answer["content"])
    if (block.is_object() && block.value("type", "") == "text" && block.contains("text") && block["text"].is_string())
      text += block["text"].get<std::string>();
  // The object may come with spaces or a code fence around it: the outermost braces.
  const size_t open = text.find('{');
  const size_t close = text.rfind('}');
  if (open == std::string::npos || close == std::string::npos || close < open)
    return escalate("the proctor's answer was not understood (no JSON object)");
  const auto verdict = nlohmann::json::parse(text.substr(open, close - open + 1), nullptr, false);
  if (verdict.is_discarded() || !verdict.is_object() || !verdict.contains("decision") ||
      !verdict["decision"].is_string())
    return escalate("the proctor's answer was not understood (no decision)");
  std::string reason = verdict.contains("reason") && verdict["reason"].is_string()
                           ? verdict["reason"].get<std::string>()
                           : std::string();
  if (reason.size() > kMaxProctorReason) reason.resize(kMaxProctorReason);
  const std::string d = verdict["decision"].get<std::string>();
  if (d == "approve") return {ProctorDecision::Approve, reason};
  if (d == "deny") return {ProctorDecision::Deny, reason};
  if (d == "escalate") return escalate(reason.empty() ? "the proctor was not sure" : reason);
  return escalate("the proctor's answer was not understood (decision '" + d.substr(0, 40) + "')");
}

Result<std::shared_ptr<GuardProctor>> GuardProctor::create(ProctorConfig config, ApprovalQueue& queue,
                                                           std::shared_ptr<const CpLink> link,
                                                           std::function<void(const std::string&)> log) {
  auto url = parse_http_url(config.url);
  if (!url) return input_error(0, "FAULTLINE_PROCTOR_URL " + config.url + ": " + url.error().message);
  HttpClientOptions o;
  o.tls = url->tls;
  o.max_body = 256 * 1024;
  auto client = HttpClient::create(o);
  if (!client) return client.error();
  return std::shared_ptr<GuardProctor>(
      new GuardProctor(std::move(config), std::move(*url), std::move(*client), queue, std::move(link), std::move(log)));
}

void GuardProctor::held(const PendingApproval& p) {
  if (stopping_.load()) return;
  thread_->post([this, p] { review(p); });
}

void GuardProctor::stop() {
  stopping_.store(true);
  thread_.reset();  // the review under way ends (its call has a deadline); the queued ones are skipped
}

void GuardProctor::review(const PendingApproval& p) {
  if (stopping_.load()) return;
  HttpCall call;
  call.method = "POST";
  call.headers = {
      {"x-api-key", config_.api_key}, {"anthropic-version", "2023-06-01"}, {"content-type", "application/json"}};
  call.body = proctor_request_body(config_, p);
  auto a = client_.call(url_, call, static_cast<uint64_t>(config_.timeout.count()) * 1'000'000ULL);
  const ProctorReview r =
      a ? read_proctor_answer(a->response.status.code, a->response.body)
        : ProctorReview{ProctorDecision::Escalate, "the proctor's model did not answer: " + a.error().describe()};
  const std::string who = "the proctor (" + config_.model + ")";
  bool decided = false;
  if (r.decision != ProctorDecision::Escalate) {
    const bool approve = r.decision == ProctorDecision::Approve;
    // A person (or faultcp) may have decided meanwhile: then the proctor's word is moot.
    decided = queue_.decide(p.id, approve, who + (r.reason.empty() ? "" : ": " + r.reason)).ok();
  }
  if (log_)
    log_("faultline guard: held " + p.id + " (" + p.method + " " + p.host + p.path + "): " + who + " says " +
         std::string(proctor_decision_word(r.decision)) + (r.reason.empty() ? "" : " (" + r.reason + ")") +
         (r.decision == ProctorDecision::Escalate ? ": left to a person"
          : decided                               ? ""
                                                  : ": decided already"));
  if (!link_ || (r.decision != ProctorDecision::Escalate && !decided)) return;
  const nlohmann::json body = {{"request_id", p.denial_id},
                               {"identity", p.identity},
                               {"decision", proctor_decision_word(r.decision)},
                               {"reason", r.reason},
                               {"model", config_.model}};
  auto posted = link_->call("POST", "/v1/guardrails/proctor/reviews",
                            body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if ((!posted || posted->response.status.code != 201) && log_)
    log_("faultline guard: the proctor's review of " + p.id +
         " was not recorded at faultcp: " + answer_problem(posted));
}

}  // namespace faultline
