// The sender's thread: the earliest due delivery, one attempt, a retry later
// or an outcome for the serving thread.
#include "cp/webhooks/webhook_sender.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <ctime>

#include "cp/auth/crypto.h"
#include "cp/webhooks/slack_message.h"

namespace faultline::cp {
namespace {

std::string rfc3339_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// 5xx, 429 and 408 are worth another try; any other answer is final.
bool retryable(int status) { return status >= 500 || status == 429 || status == 408; }

}  // namespace

std::string webhook_signature(const std::string& secret, int64_t timestamp, const std::string& body) {
  return "sha256=" + hmac_sha256_hex(secret, std::to_string(timestamp) + "." + body);
}

Result<std::unique_ptr<WebhookSender>> WebhookSender::start(WebhookRetryPolicy policy) {
  UniqueFd event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!event) return errno_error("eventfd");
  return std::unique_ptr<WebhookSender>(new WebhookSender(policy, std::move(event)));
}

WebhookSender::WebhookSender(WebhookRetryPolicy policy, UniqueFd event)
    : policy_(policy), event_(std::move(event)), thread_([this] { run(); }) {}

WebhookSender::~WebhookSender() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool WebhookSender::send(WebhookDelivery delivery) {
  {
    std::lock_guard lock(mu_);
    if (due_.size() >= policy_.max_queued) return false;
    due_.emplace(std::chrono::steady_clock::now(), Pending{std::move(delivery), 0});
  }
  cv_.notify_all();
  return true;
}

std::vector<WebhookOutcome> WebhookSender::take_outcomes() {
  uint64_t n = 0;
  (void)::read(event_.get(), &n, sizeof(n));
  std::lock_guard lock(mu_);
  std::vector<WebhookOutcome> out;
  out.swap(outcomes_);
  return out;
}

Result<int> WebhookSender::attempt(const WebhookDelivery& d) {
  nlohmann::json envelope = d.envelope;
  envelope["sent_at"] = rfc3339_now();
  // Invalid UTF-8 (none should reach here) is replaced, never thrown on this thread.
  const auto as_text = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const std::string body = as_text(d.format == WebhookFormat::Slack ? slack_message(envelope) : envelope);
  const int64_t ts =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<std::pair<std::string, std::string>> headers{{"X-Faultline-Trigger", d.trigger},
                                                           {"X-Faultline-Delivery", std::to_string(d.id)}};
  // A Slack webhook configured without a secret: nothing to sign with.
  if (!d.secret.empty()) {
    headers.emplace_back("X-Faultline-Timestamp", std::to_string(ts));
    headers.emplace_back("X-Faultline-Signature", webhook_signature(d.secret, ts, body));
  }
  return post_webhook(d.url, headers, body, policy_.timeout);
}

void WebhookSender::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (due_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const auto when = due_.begin()->first;
    if (when > std::chrono::steady_clock::now()) {
      cv_.wait_until(lock, when);
      continue;
    }
    Pending p = std::move(due_.begin()->second);
    due_.erase(due_.begin());
    lock.unlock();
    ++p.attempts;
    auto status = attempt(p.delivery);
    const bool ok = status && *status >= 200 && *status < 300;
    const bool again = !ok && (!status || retryable(*status)) && p.attempts < policy_.max_attempts;
    lock.lock();
    if (again) {
      const auto backoff = policy_.first_backoff * (1 << std::min(p.attempts - 1, 16));
      due_.emplace(std::chrono::steady_clock::now() + backoff, std::move(p));
      continue;
    }
    WebhookOutcome o{p.delivery.id,
                     p.delivery.workspace_id,
                     p.delivery.trigger,
                     p.delivery.url_text,
                     ok,
                     p.attempts,
                     status ? *status : 0,
                     status ? "" : status.error().describe()};
    if (status && !ok) o.error = "answered " + std::to_string(*status);
    outcomes_.push_back(std::move(o));
    const uint64_t one = 1;
    (void)::write(event_.get(), &one, sizeof(one));
  }
}

}  // namespace faultline::cp
