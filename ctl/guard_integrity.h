// `faultctl guard --integrity PATH --integrity-interval D`: the baselines of
// userspace/guard/integrity.h taken before the command starts, re-checked
// every interval on a thread of their own and once more at exit; each change
// said on stderr and, with the request guard, kept in its activity log (kind
// integrity) with its tamper risk for --circuit-breaker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "userspace/guard/integrity.h"

namespace faultline {

class GuardJudge;

struct GuardIntegrityOptions {
  std::vector<std::string> paths;  // --integrity (empty: off)
  std::chrono::milliseconds interval{30'000};
  [[nodiscard]] bool enabled() const { return !paths.empty(); }
};

class GuardIntegrity {
 public:
  // The baselines, before the command is forked; a path that cannot be
  // watched is bad input. With judge: the findings go to its log and breaker.
  [[nodiscard]] static Result<std::unique_ptr<GuardIntegrity>> start(const GuardIntegrityOptions& o, GuardJudge* judge,
                                                                     std::ostream& log);
  ~GuardIntegrity();
  GuardIntegrity(const GuardIntegrity&) = delete;
  GuardIntegrity& operator=(const GuardIntegrity&) = delete;

  // After the command exited: the thread stopped, the last check, the summary.
  void finish(std::ostream& log);

 private:
  GuardIntegrity(IntegrityBaseline baseline, std::chrono::milliseconds interval, GuardJudge* judge)
      : baseline_(std::move(baseline)), interval_(interval), judge_(judge) {}
  void run();
  void check();  // one recheck, its changes said (on the thread, or in finish)

  IntegrityBaseline baseline_;  // the thread's, then finish()'s
  const std::chrono::milliseconds interval_;
  GuardJudge* judge_;
  uint64_t checks_ = 0, changes_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace faultline
