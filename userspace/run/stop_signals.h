// SIGINT/SIGTERM (and optionally SIGHUP) as a flag a run loop polls, for the
// length of one run: the loop ends the fault itself before exiting.
#pragma once

#include <signal.h>

namespace faultline {

// Where a run loop hears that it should stop: this process's signals, or (a run
// served by faultd) the signals its faultctl forwards and its hanging up.
class StopSource {
 public:
  virtual ~StopSource() = default;
  // The last stop signal, 0 if none.
  [[nodiscard]] virtual int pending() const = 0;
  // Returns the last signal and clears it.
  virtual int take() = 0;
};

class StopSignals final : public StopSource {
 public:
  explicit StopSignals(bool hangup = false);
  ~StopSignals() override;
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The last signal received, 0 if none.
  [[nodiscard]] int pending() const override;
  int take() override;

 private:
  bool hangup_;
  struct sigaction old_int_ {
  }, old_term_{}, old_hup_{};
};

}  // namespace faultline
