// Held requests and their deadlines: settled exactly once, never under the lock
// (a settle completes a proxy request and writes the activity log).
#include "userspace/guard/approval_queue.h"

#include <algorithm>
#include <cerrno>

namespace faultline {

ApprovalQueue::ApprovalQueue(std::string id_prefix, std::chrono::milliseconds timeout)
    : prefix_(std::move(id_prefix)), timeout_(timeout), timer_([this] { run_timer(); }) {}

ApprovalQueue::~ApprovalQueue() {
  std::map<std::string, Entry> left;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    left.swap(held_);
  }
  cv_.notify_all();
  timer_.join();
  for (auto& [id, e] : left) settle(e, ApprovalOutcome::TimedOut, "the guard stopped");
}

std::string ApprovalQueue::add(PendingApproval pending, ApprovalSettle settle) {
  std::string id;
  {
    std::lock_guard lock(mu_);
    id = prefix_ + "." + std::to_string(++next_);
    pending.id = id;
    pending.created = std::chrono::system_clock::now();
    pending.deadline = pending.created + timeout_;
    held_.emplace(id, Entry{pending, std::move(settle)});
  }
  cv_.notify_all();
  if (listener_) listener_->held(pending);
  return id;
}

std::vector<PendingApproval> ApprovalQueue::list() const {
  std::vector<PendingApproval> out;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, e] : held_) out.push_back(e.pending);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.created < b.created; });
  return out;
}

std::optional<ApprovalQueue::Entry> ApprovalQueue::take_locked(const std::string& id) {
  auto it = held_.find(id);
  if (it == held_.end()) return std::nullopt;
  Entry e = std::move(it->second);
  held_.erase(it);
  return e;
}

Result<PendingApproval> ApprovalQueue::decide(const std::string& id, bool approve, const std::string& reason) {
  std::optional<Entry> e;
  {
    std::lock_guard lock(mu_);
    e = take_locked(id);
  }
  if (!e) return input_error(ENOENT, "no request " + id + " is waiting for approval");
  settle(*e, approve ? ApprovalOutcome::Approved : ApprovalOutcome::Denied, reason);
  return e->pending;
}

bool ApprovalQueue::withdraw(uint64_t request_id) {
  std::optional<Entry> e;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, entry] : held_) {
      if (entry.pending.subject == ApprovalSubject::Request && entry.pending.request_id == request_id) {
        e = take_locked(std::string(id));
        break;
      }
    }
  }
  if (!e) return false;
  settle(*e, ApprovalOutcome::Withdrawn, "the client went away");
  return true;
}

void ApprovalQueue::settle(Entry& e, ApprovalOutcome o, const std::string& reason) {
  e.settle(o, reason);
  if (listener_) listener_->settled(e.pending, o);
}

void ApprovalQueue::run_timer() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const auto now = std::chrono::system_clock::now();
    std::vector<Entry> due;
    std::optional<std::chrono::system_clock::time_point> next;
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->second.pending.deadline <= now) {
        due.push_back(std::move(it->second));
        it = held_.erase(it);
      } else {
        if (!next || it->second.pending.deadline < *next) next = it->second.pending.deadline;
        ++it;
      }
    }
    if (!due.empty()) {
      lock.unlock();
      for (auto& e : due) settle(e, ApprovalOutcome::TimedOut, "no decision within the approval timeout");
      lock.lock();
      continue;
    }
    if (next)
      cv_.wait_until(lock, *next);
    else
      cv_.wait(lock);
  }
}

}  // namespace faultline
