// A sliding sum of risk points; one trip per breaker.
#include "userspace/guard/circuit_breaker.h"

namespace faultline {

uint32_t risk_points(RiskKind kind) {
  switch (kind) {
    case RiskKind::injection:
    case RiskKind::exfil:
    case RiskKind::honeytoken:
    case RiskKind::response_threat:
      return 100;
    case RiskKind::tamper:
      return 60;
    case RiskKind::block:
      return 25;
  }
  return 0;
}

const char* risk_kind_name(RiskKind kind) {
  switch (kind) {
    case RiskKind::injection:
      return "injection";
    case RiskKind::exfil:
      return "exfil";
    case RiskKind::honeytoken:
      return "honeytoken";
    case RiskKind::response_threat:
      return "response_threat";
    case RiskKind::tamper:
      return "tamper";
    case RiskKind::block:
      return "block";
  }
  return "?";
}

CircuitBreaker::CircuitBreaker(uint32_t threshold, std::chrono::milliseconds window,
                               std::function<void(uint32_t, const std::string&)> on_trip)
    : threshold_(threshold), window_(window), on_trip_(std::move(on_trip)) {}

void CircuitBreaker::expire(Clock::time_point now) const {
  while (!events_.empty() && now - events_.front().first >= window_) {
    sum_ -= events_.front().second;
    events_.pop_front();
  }
}

bool CircuitBreaker::add(RiskKind kind, const std::string& what, Clock::time_point now) {
  uint32_t score = 0;
  {
    std::lock_guard lock(mu_);
    if (tripped_) return false;
    expire(now);
    const uint32_t points = risk_points(kind);
    events_.emplace_back(now, points);
    sum_ += points;
    if (sum_ < threshold_) return false;
    tripped_ = true;
    score = sum_;
  }
  if (on_trip_) on_trip_(score, std::string(risk_kind_name(kind)) + ": " + what);
  return true;
}

bool CircuitBreaker::tripped() const {
  std::lock_guard lock(mu_);
  return tripped_;
}

uint32_t CircuitBreaker::score(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  expire(now);
  return sum_;
}

}  // namespace faultline
