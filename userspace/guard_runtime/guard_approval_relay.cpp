// One thread per held request: POST it, long-poll its decision, apply it to the
// local queue (where the first decision wins), DELETE it when the local side
// ended it first. A held request is a person's minutes: threads are few.
#include "userspace/guard_runtime/guard_approval_relay.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace faultline {
namespace guard_approval_relay_impl {

constexpr uint64_t kRelayCallTimeoutMs = 10'000;
constexpr uint64_t kRelayPollTimeoutMs = 40'000;  // faultcp holds the poll 30 s
constexpr uint64_t kRelayWithdrawTimeoutMs = 3'000;

std::string relay_rfc3339_ms(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

// Sleeps up to ms, or until fd is readable; false when it is.
bool relay_nap(int fd, uint64_t ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(ms)) == 0;
}

}  // namespace guard_approval_relay_impl

using namespace guard_approval_relay_impl;

GuardApprovalRelay::GuardApprovalRelay(std::shared_ptr<const CpLink> link, ApprovalQueue& queue, Log log)
    : link_(std::move(link)), queue_(queue), log_(std::move(log)) {}

GuardApprovalRelay::~GuardApprovalRelay() { stop(); }

void GuardApprovalRelay::reap_locked() {
  for (auto it = holds_.begin(); it != holds_.end();) {
    if (it->second->done.load()) {
      it->second->thread.join();
      it = holds_.erase(it);
    } else {
      ++it;
    }
  }
}

void GuardApprovalRelay::held(const PendingApproval& p) {
  std::lock_guard lock(mu_);
  reap_locked();
  if (stopping_ || settled_early_.erase(p.id) > 0) return;
  auto h = std::make_shared<Hold>();
  h->pending = p;
  h->wake = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!h->wake) {
    log_("faultline guard: faultcp: cannot follow approval " + p.id + ": no eventfd");
    return;
  }
  h->thread = std::thread([this, h] { follow(h); });
  holds_.emplace(p.id, h);
}

void GuardApprovalRelay::settled(const PendingApproval& p, ApprovalOutcome outcome) {
  (void)outcome;
  std::lock_guard lock(mu_);
  auto it = holds_.find(p.id);
  if (it == holds_.end()) {
    if (!stopping_) settled_early_.insert(p.id);
    return;
  }
  it->second->settled = true;
  const uint64_t one = 1;
  (void)!::write(it->second->wake.get(), &one, sizeof one);
}

void GuardApprovalRelay::stop() {
  std::map<std::string, std::shared_ptr<Hold>> holds;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    holds.swap(holds_);
  }
  const uint64_t one = 1;
  for (auto& [id, h] : holds) (void)!::write(h->wake.get(), &one, sizeof one);
  for (auto& [id, h] : holds) h->thread.join();
}

void GuardApprovalRelay::follow(const std::shared_ptr<Hold>& h) {
  const PendingApproval& p = h->pending;
  const int wake = h->wake.get();
  const nlohmann::json post = {{"request_id", p.denial_id},
                               {"identity", p.identity},
                               {"method", p.method},
                               {"host", p.host},
                               {"path", p.path},
                               {"rule", p.rule},
                               {"reason", p.reason},
                               {"expires_at", relay_rfc3339_ms(p.deadline)}};
  // Posted until faultcp takes it (the same request_id again is the same
  // approval), the local side ends it, or the deadline passes.
  int64_t cp_id = 0;
  uint64_t backoff = 250;
  std::string last;
  while (cp_id == 0) {
    if (std::chrono::system_clock::now() >= p.deadline) break;
    auto a =
        link_->call("POST", "/v1/guardrails/approvals", post.dump(), "application/json", kRelayCallTimeoutMs, wake);
    if (a && (a->response.status.code == 200 || a->response.status.code == 201)) {
      if (auto j = answer_object(*a); j && j->contains("id") && (*j)["id"].is_number_integer())
        cp_id = (*j)["id"].get<int64_t>();
      break;
    }
    if (a && a->response.status.code / 100 == 4) {  // refused for good: the local path alone decides
      log_("faultline guard: faultcp refuses approval " + p.id + ": " + answer_problem(a));
      break;
    }
    if (const std::string now = answer_problem(a); now != last && !h->settled.load()) {
      last = now;
      log_("faultline guard: faultcp: approval " + p.id + " not posted yet (" + now + "), retrying");
    }
    if (!relay_nap(wake, backoff)) break;
    backoff = std::min<uint64_t>(backoff * 2, 5'000);
  }
  // A quick local decision (the proctor's) cancels a post that faultcp may
  // have stored already: asked once more, without the cancel (the same
  // request_id is the same approval), so that the copy is withdrawn below
  // rather than left pending until it expires.
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    stopping = stopping_;
  }
  if (cp_id == 0 && h->settled.load() && !stopping && std::chrono::system_clock::now() < p.deadline) {
    auto a = link_->call("POST", "/v1/guardrails/approvals", post.dump(), "application/json", kRelayCallTimeoutMs);
    if (a && (a->response.status.code == 200 || a->response.status.code == 201))
      if (auto j = answer_object(*a); j && j->contains("id") && (*j)["id"].is_number_integer())
        cp_id = (*j)["id"].get<int64_t>();
  }
  const std::string path = "/v1/guardrails/approvals/" + std::to_string(cp_id);
  if (cp_id != 0 && !h->settled.load())
    log_("faultline guard: approval " + p.id + " is also in faultcp as approval " + std::to_string(cp_id) + " (" +
         link_->text() + ")");
  // The decision, long-polled until one side decides.
  while (cp_id != 0 && !h->settled.load()) {
    auto a = link_->call("GET", path + "/decision?wait=30s", "", "", kRelayPollTimeoutMs, wake);
    if (h->settled.load()) break;
    auto j = a && a->response.status.code == 200 ? answer_object(*a) : std::nullopt;
    if (!j) {
      if (!relay_nap(wake, 500)) break;
      continue;
    }
    const std::string state = j->value("state", "");
    if (state == "pending") continue;
    const std::string by = j->value("decided_by", "");
    const std::string why = j->value("decision_reason", "");
    const bool approve = state == "approved" && j->contains("decision") && (*j)["decision"] == "approve";
    if (state == "expired") break;  // the local timer denies it at the same deadline
    std::string reason = why;
    if (state == "withdrawn") reason = "withdrawn at faultcp";
    reason += std::string(reason.empty() ? "" : " ") + "(faultcp" + (by.empty() ? "" : ", " + by) + ")";
    h->by_cp = true;
    if (!queue_.decide(p.id, approve, reason)) h->by_cp = false;  // the local side was first
    break;
  }
  // The local side ended it (or the guard stops): faultcp's copy goes too.
  if (cp_id != 0 && !h->by_cp.load() && std::chrono::system_clock::now() < p.deadline) {
    auto a = link_->call("DELETE", path, "", "", kRelayWithdrawTimeoutMs);
    if (a && a->response.status.code != 200 && a->response.status.code != 409)
      log_("faultline guard: faultcp: approval " + std::to_string(cp_id) + " not withdrawn: " + answer_problem(a));
  }
  h->done = true;
}

}  // namespace faultline
