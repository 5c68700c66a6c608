// The guard's activity lines to faultcp: spooled as they are written, sent by
// one thread in batches (at most 200 lines and 64 KiB), off the request path,
// and dropped from the spool only once faultcp says it stored them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "userspace/guard/activity_log.h"
#include "userspace/guard/activity_spool.h"
#include "userspace/guard_runtime/cp_link.h"

namespace faultline {

class GuardActivityReporter {
 public:
  using Log = std::function<void(const std::string&)>;
  static constexpr size_t kMaxBatchEntries = 200;
  static constexpr size_t kMaxBatchBytes = 60 * 1024;  // faultcp's body limit is 64 KiB

  // Starts the sender; what the spool holds from before (a guard restart, a
  // faultcp that was down) goes first.
  [[nodiscard]] static std::unique_ptr<GuardActivityReporter> start(std::shared_ptr<const CpLink> link,
                                                                    std::unique_ptr<ActivitySpool> spool, Log log);
  // start() with the spool of one activity chain, `chain` (its identity):
  // STATE_DIR/cp-spool-WORD.jsonl, WORD being activity_file_word(chain).
  [[nodiscard]] static Result<std::unique_ptr<GuardActivityReporter>> open(std::shared_ptr<const CpLink> link,
                                                                           const std::string& state_dir,
                                                                           const std::string& chain, Log log);
  // Tries for up to 2 s to deliver what is left; the rest stays spooled.
  ~GuardActivityReporter();
  GuardActivityReporter(const GuardActivityReporter&) = delete;
  GuardActivityReporter& operator=(const GuardActivityReporter&) = delete;

  // The activity writer's on_append: spools the line and wakes the sender.
  void add(const ActivityEntry& e, const std::string& line);
  [[nodiscard]] size_t spooled() const { return spool_->size(); }
  // What the spool held when the reporter started (from an earlier guard).
  [[nodiscard]] size_t spooled_at_start() const { return spooled_at_start_; }

 private:
  GuardActivityReporter(std::shared_ptr<const CpLink> link, std::unique_ptr<ActivitySpool> spool, Log log);
  void run();
  // One batch; false when faultcp did not take it (the caller waits).
  [[nodiscard]] bool send_one_batch();
  void note_problem(const std::string& problem);

  std::shared_ptr<const CpLink> link_;
  std::unique_ptr<ActivitySpool> spool_;
  size_t spooled_at_start_ = 0;
  Log log_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool single_ = false;       // a batch was refused as bad input: find the line, one at a time
  std::string last_problem_;  // logged once until it changes
  std::thread sender_;
};

// An activity chain's identity as part of a file name (the default activity
// log and the spool in the state folder): letters, digits and "@._-" kept.
[[nodiscard]] std::string activity_file_word(const std::string& identity);

}  // namespace faultline
