// One process-wide flag set by the handler; StopSignals installs and restores it.
#include "userspace/run/stop_signals.h"

#include <atomic>

namespace faultline {
namespace {

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal.store(sig); }

}  // namespace

StopSignals::StopSignals(bool hangup) : hangup_(hangup) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  if (hangup_) sigaction(SIGHUP, &sa, &old_hup_);
  g_signal.store(0);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  if (hangup_) sigaction(SIGHUP, &old_hup_, nullptr);
}

int StopSignals::pending() const { return g_signal.load(); }
int StopSignals::take() { return g_signal.exchange(0); }

}  // namespace faultline
