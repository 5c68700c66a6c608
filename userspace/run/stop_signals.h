// SIGINT/SIGTERM (and optionally SIGHUP) as a flag a run loop polls, for the
// length of one run: the loop ends the fault itself before exiting.
#pragma once

#include <signal.h>

namespace faultline {

class StopSignals {
 public:
  explicit StopSignals(bool hangup = false);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The last signal received, 0 if none.
  [[nodiscard]] int pending() const;
  // Returns the last signal and clears it.
  int take();

 private:
  bool hangup_;
  struct sigaction old_int_ {}, old_term_ {}, old_hup_ {};
};

}  // namespace faultline
