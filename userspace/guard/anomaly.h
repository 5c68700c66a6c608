// `faultctl guard --anomaly --anomaly-learn D`: the destinations (host:port) the
// session reaches, the programs it runs, the tools its model calls and its
// token rate during its warm-up are its baseline; after it, a destination,
// program or tool not in it is flagged once, and a token rate over
// kTokenDriftFactor times the warm-up's once (monitor only). Nothing is
// flagged before the warm-up ends. docs/detectors.md, "Anomaly".
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
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
  // A tool an LLM answer calls (its name as the model wrote it), the same way.
  [[nodiscard]] bool new_tool(std::string_view name, Clock::time_point now = Clock::now()) {
    return new_item("tool", name, now);
  }
  // An LLM call's billed tokens (input and output), counted when its answer
  // ends. During the warm-up they make its rate (tokens per minute over the
  // whole warm-up); after it, the rate of the last minute is compared with it:
  // the first time it is over kTokenDriftFactor times the warm-up's (and over
  // kTokenRateFloor tokens a minute, so a quiet warm-up is not a baseline of
  // nothing), what was seen; nothing otherwise, and nothing again.
  [[nodiscard]] std::optional<std::string> note_tokens(uint64_t tokens, Clock::time_point now = Clock::now());
  static constexpr uint64_t kTokenDriftFactor = 3;
  static constexpr uint64_t kTokenRateFloor = 1000;  // tokens a minute
  [[nodiscard]] std::chrono::milliseconds learn() const { return learn_; }
  [[nodiscard]] size_t learned() const;

 private:
  [[nodiscard]] bool new_item(std::string_view kind, std::string_view item, Clock::time_point now);
  const std::chrono::milliseconds learn_;
  const Clock::time_point until_;
  mutable std::mutex mu_;
  std::set<std::string> learned_, flagged_;
  uint64_t warmup_tokens_ = 0;
  std::deque<std::pair<Clock::time_point, uint64_t>> recent_;  // after the warm-up: the last minute's calls
  uint64_t recent_tokens_ = 0;
  bool rate_flagged_ = false;
};

}  // namespace faultline
