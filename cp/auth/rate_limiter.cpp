// The sliding window: a queue of event times per key, pruned as it is read.
#include "cp/auth/rate_limiter.h"

namespace faultline::cp {

void RateLimiter::prune(std::deque<Clock::time_point>& q, Clock::time_point now) const {
  while (!q.empty() && now - q.front() >= limit_.window) q.pop_front();
}

std::chrono::milliseconds RateLimiter::blocked_for(const std::string& key, Clock::time_point now) {
  auto it = events_.find(key);
  if (it == events_.end()) return std::chrono::milliseconds(0);
  prune(it->second, now);
  if (it->second.size() < limit_.max_events) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(it->second.front() + limit_.window - now);
}

void RateLimiter::record(const std::string& key, Clock::time_point now) {
  auto& q = events_[key];
  prune(q, now);
  q.push_back(now);
  // Keys whose window passed are dropped now and then, so memory follows the
  // keys active in one window, not every address ever seen.
  if (++since_sweep_ >= 1024) {
    since_sweep_ = 0;
    for (auto i = events_.begin(); i != events_.end();) {
      prune(i->second, now);
      i = i->second.empty() ? events_.erase(i) : std::next(i);
    }
  }
}

}  // namespace faultline::cp
