// --circuit-breaker: the risk of a session's findings summed over a sliding
// window; crossing the threshold trips it once (its callback revokes the
// session's egress and ends the command). docs/detectors.md, "The circuit breaker".
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

namespace faultline {

// What each kind of finding weighs.
enum class RiskKind : uint8_t { injection, exfil, honeytoken, response_threat, tamper, block };
[[nodiscard]] uint32_t risk_points(RiskKind kind);
[[nodiscard]] const char* risk_kind_name(RiskKind kind);

class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  // on_trip: called once, on the thread whose finding crossed the threshold,
  // with the score and what crossed it; it must be quick (post, do not wait).
  CircuitBreaker(uint32_t threshold, std::chrono::milliseconds window,
                 std::function<void(uint32_t score, const std::string& what)> on_trip);

  // A finding: its points join the window. True when this one tripped it.
  bool add(RiskKind kind, const std::string& what, Clock::time_point now = Clock::now());
  [[nodiscard]] bool tripped() const;
  [[nodiscard]] uint32_t score(Clock::time_point now = Clock::now()) const;
  [[nodiscard]] uint32_t threshold() const { return threshold_; }
  [[nodiscard]] std::chrono::milliseconds window() const { return window_; }

 private:
  void expire(Clock::time_point now) const;
  const uint32_t threshold_;
  const std::chrono::milliseconds window_;
  std::function<void(uint32_t, const std::string&)> on_trip_;
  mutable std::mutex mu_;
  mutable std::deque<std::pair<Clock::time_point, uint32_t>> events_;
  mutable uint32_t sum_ = 0;
  bool tripped_ = false;
};

}  // namespace faultline
