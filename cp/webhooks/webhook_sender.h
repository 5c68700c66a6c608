// Outbound webhooks off the serving thread: send() queues a delivery and
// returns at once; a thread of its own posts it, signed, and retries with
// exponential backoff. Outcomes come back through an eventfd that the
// serving thread watches (to write them into the activity log there).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "cp/webhooks/webhook_post.h"

namespace faultline::cp {

struct WebhookRetryPolicy {
  int max_attempts = 5;
  std::chrono::milliseconds first_backoff{1000};  // doubled after each failed attempt
  std::chrono::milliseconds timeout{5000};        // per attempt: connect, send, status line
  size_t max_queued = 10'000;                     // deliveries beyond are dropped (and reported)
};

// The body a receiver gets: the envelope as JSON, or the envelope rendered as
// a Slack incoming-webhook message (slack_message.h). Signed either way.
enum class WebhookFormat { Envelope, Slack };

struct WebhookDelivery {
  uint64_t id = 0;
  int64_t workspace_id = 0;
  std::string trigger;
  WebhookUrl url;
  std::string url_text;
  std::string secret;
  // {source, trigger, title, text, fields}; sent_at is added at each attempt.
  nlohmann::json envelope;
  WebhookFormat format = WebhookFormat::Envelope;
};

struct WebhookOutcome {
  uint64_t id = 0;
  int64_t workspace_id = 0;
  std::string trigger;
  std::string url;
  bool delivered = false;
  int attempts = 0;
  int status = 0;     // the last answer's status code; 0 if none came
  std::string error;  // why the last attempt failed
};

// The headers of a signed body: X-Faultline-Timestamp (Unix seconds) and
// X-Faultline-Signature, "sha256=" HMAC-SHA256(secret, "TIMESTAMP.BODY") in hex.
[[nodiscard]] std::string webhook_signature(const std::string& secret, int64_t timestamp, const std::string& body);

class WebhookSender {
 public:
  [[nodiscard]] static Result<std::unique_ptr<WebhookSender>> start(WebhookRetryPolicy policy);
  ~WebhookSender();  // stops the thread; deliveries still queued are dropped
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  // Queues it (never blocks on the network); false if the queue is full.
  [[nodiscard]] bool send(WebhookDelivery delivery);
  // Readable while outcomes wait; take_outcomes() empties it.
  [[nodiscard]] int event_fd() const { return event_.get(); }
  [[nodiscard]] std::vector<WebhookOutcome> take_outcomes();

 private:
  WebhookSender(WebhookRetryPolicy policy, UniqueFd event);
  void run();
  // One attempt: the status code, or why none.
  [[nodiscard]] Result<int> attempt(const WebhookDelivery& d);

  struct Pending {
    WebhookDelivery delivery;
    int attempts = 0;
  };
  WebhookRetryPolicy policy_;
  UniqueFd event_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::multimap<std::chrono::steady_clock::time_point, Pending> due_;
  std::vector<WebhookOutcome> outcomes_;
  std::thread thread_;
};

}  // namespace faultline::cp
