// The LLM proctor: a model that reviews each request a guard holds for
// approval before a person does, and may approve or deny it, or leave it to
// the person (docs/guard.md, "The proctor").
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "userspace/guard/approval_queue.h"
#include "userspace/guard/task_thread.h"
#include "userspace/guard_runtime/cp_link.h"
#include "userspace/guardrails/http_client.h"

namespace faultline {

// FAULTLINE_PROCTOR_API_KEY, FAULTLINE_PROCTOR_MODEL, FAULTLINE_PROCTOR_URL
// (an Anthropic Messages API endpoint; default https://api.anthropic.com/v1/messages),
// FAULTLINE_PROCTOR_TIMEOUT_MS (default 10000, 100-120000).
struct ProctorConfig {
  std::string url;
  std::string model;
  std::string api_key;
  std::chrono::milliseconds timeout{10'000};
};

// None when FAULTLINE_PROCTOR_API_KEY is unset or empty (no proctor); bad
// input naming the variable when the rest does not make one.
[[nodiscard]] Result<std::optional<ProctorConfig>> proctor_config_from_env();

enum class ProctorDecision : uint8_t { Approve, Deny, Escalate };
[[nodiscard]] std::string_view proctor_decision_word(ProctorDecision d);  // "approve", "deny", "escalate"

struct ProctorReview {
  ProctorDecision decision = ProctorDecision::Escalate;
  std::string reason;  // the model's, or why the request goes to a person
};

// The Messages API request that asks the model about one held request.
[[nodiscard]] std::string proctor_request_body(const ProctorConfig& c, const PendingApproval& p);
// The model's answer (status and body) as a review: only a 200 whose text is
// a JSON object {"decision":"approve"|"deny"|"escalate","reason":"..."}
// decides; anything else escalates, saying why.
[[nodiscard]] ProctorReview read_proctor_answer(int status, std::string_view body);

// Reviews each held request on a thread of its own (one at a time, oldest
// first) and decides it in the queue when the model approves or denies; a
// doubt, a bad answer, an error or no answer within the timeout leaves it
// held for a person. With faultcp (link), each review is posted to
// /v1/guardrails/proctor/reviews, audited there as guardrail.proctor.<decision>.
class GuardProctor final : public ApprovalListener {
 public:
  [[nodiscard]] static Result<std::shared_ptr<GuardProctor>> create(ProctorConfig config, ApprovalQueue& queue,
                                                                    std::shared_ptr<const CpLink> link,
                                                                    std::function<void(const std::string&)> log);
  void held(const PendingApproval& p) override;
  void settled(const PendingApproval&, ApprovalOutcome) override {}
  // Ends the reviews: those not yet asked are left to a person.
  void stop();
  [[nodiscard]] const ProctorConfig& config() const { return config_; }

 private:
  GuardProctor(ProctorConfig config, HttpUrl url, HttpClient client, ApprovalQueue& queue,
               std::shared_ptr<const CpLink> link, std::function<void(const std::string&)> log)
      : config_(std::move(config)),
        url_(std::move(url)),
        client_(std::move(client)),
        queue_(queue),
        link_(std::move(link)),
        log_(std::move(log)) {}
  void review(const PendingApproval& p);

  ProctorConfig config_;
  HttpUrl url_;
  HttpClient client_;
  ApprovalQueue& queue_;
  std::shared_ptr<const CpLink> link_;
  std::function<void(const std::string&)> log_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<TaskThread> thread_ = std::make_unique<TaskThread>();  // last: its tasks use the rest
};

// Tells several listeners (the faultcp relay and the proctor) of each hold
// and ending, in order.
class ApprovalListeners final : public ApprovalListener {
 public:
  explicit ApprovalListeners(std::vector<std::shared_ptr<ApprovalListener>> all) : all_(std::move(all)) {}
  void held(const PendingApproval& p) override {
    for (const auto& l : all_) l->held(p);
  }
  void settled(const PendingApproval& p, ApprovalOutcome o) override {
    for (const auto& l : all_) l->settled(p, o);
  }

 private:
  std::vector<std::shared_ptr<ApprovalListener>> all_;
};

}  // namespace faultline
