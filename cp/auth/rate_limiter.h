// Counts events per key in a sliding window (login attempts per address,
// failures per account): over the limit, the caller refuses with 429 before
// doing any work (no scrypt for a flood).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <string>

namespace faultline::cp {

struct RateLimit {
  size_t max_events = 10;
  std::chrono::milliseconds window{60'000};
};

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(RateLimit limit) : limit_(limit) {}
  // How long until the key may act again; zero if it may now.
  [[nodiscard]] std::chrono::milliseconds blocked_for(const std::string& key, Clock::time_point now);
  void record(const std::string& key, Clock::time_point now);
  void clear(const std::string& key) { events_.erase(key); }

 private:
  void prune(std::deque<Clock::time_point>& q, Clock::time_point now) const;
  RateLimit limit_;
  std::map<std::string, std::deque<Clock::time_point>> events_;
  size_t since_sweep_ = 0;
};

}  // namespace faultline::cp
