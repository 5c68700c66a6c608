// `faultctl guard --anomaly --anomaly-learn D`: the destinations (host:port) the
// session reaches during its warm-up are its baseline; after it, a host not in
// it is flagged once (monitor only). Nothing is flagged before the warm-up
// ends. docs/detectors.md, "Anomaly".
#pragma once

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace faultline {

class AnomalyWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // The warm-up starts now and lasts `learn`.
  explicit AnomalyWatch(std::chrono::milliseconds learn, Clock::time_point start = Clock::now());

  // A request to a destination ("host:port", any case): learned during the
  // warm-up; after it, true the first time one not learned is seen.
  [[nodiscard]] bool new_host(std::string_view host, Clock::time_point now = Clock::now()) {
    return new_item("host", host, now);
  }
  // A program the command execs (its path as run), the same way.
  [[nodiscard]] bool new_program(std::string_view path, Clock::time_point now = Clock::now()) {
    return new_item("exec", path, now);
  }
  [[nodiscard]] std::chrono::milliseconds learn() const { return learn_; }
  [[nodiscard]] size_t learned() const;

 private:
  [[nodiscard]] bool new_item(std::string_view kind, std::string_view item, Clock::time_point now);
  const std::chrono::milliseconds learn_;
  const Clock::time_point until_;
  mutable std::mutex mu_;
  std::set<std::string> learned_, flagged_;
};

}  // namespace faultline
