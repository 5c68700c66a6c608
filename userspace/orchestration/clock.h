// The orchestration's clock: the validator's window and the watchdog's steady
// state are judged against it, so a test (or a replay) sets the time it means.
#pragma once

#include <cstdint>

namespace faultline {

class Clock {
 public:
  virtual ~Clock() = default;
  // Seconds since the Unix epoch, UTC.
  [[nodiscard]] virtual int64_t now_unix_s() const = 0;
};

// The host's wall clock.
class SystemClock final : public Clock {
 public:
  [[nodiscard]] int64_t now_unix_s() const override;
};

// A clock that reads what it was set to (a test's Tuesday at 10:00 UTC, a
// replayed decision's time).
class FixedClock final : public Clock {
 public:
  explicit FixedClock(int64_t unix_s) : unix_s_(unix_s) {}
  [[nodiscard]] int64_t now_unix_s() const override { return unix_s_; }
  void set(int64_t unix_s) { unix_s_ = unix_s; }

 private:
  int64_t unix_s_;
};

}  // namespace faultline
