// `faultctl guard --integrity PATH --integrity-interval D`: the baselines of
// userspace/guard/integrity.h taken before the command starts, re-checked
// every interval on a thread of their own and once more at exit; each change
// said on stderr and, with the request guard, kept in its activity log (kind
// integrity) with its tamper risk for --circuit-breaker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "userspace/guard/command_tree.h"
#include "userspace/guard/fs_watch.h"
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
  // Once the command is forked (root): the root of the tree whose writes are its own.
  void forked(pid_t pid);
  GuardIntegrity(const GuardIntegrity&) = delete;
  GuardIntegrity& operator=(const GuardIntegrity&) = delete;

  // After the command exited: the thread stopped, the last check, the summary.
  void finish(std::ostream& log);

 private:
  GuardIntegrity(IntegrityBaseline baseline, std::chrono::milliseconds interval, GuardJudge* judge)
      : baseline_(std::move(baseline)), interval_(interval), judge_(judge) {}
  void run();
  void check();  // one recheck, its changes said (on the thread, or in finish)
  // Root: the file watches of the paths' folders that see the command's own
  // writes (fanotify, the command's process tree); false when not available.
  bool attribute(std::ostream& log);
  // Whether the file is as the command's tree last left it (the digest after
  // its last write, or removed by it); waits a little for the watch's thread
  // to read its events.
  bool by_command(const IntegrityChange& c);

  IntegrityBaseline baseline_;  // the thread's, then finish()'s
  const std::chrono::milliseconds interval_;
  GuardJudge* judge_;
  uint64_t checks_ = 0, changes_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
  std::unique_ptr<CommandTree> tree_;              // root: the command's processes
  std::vector<std::unique_ptr<FsWatch>> watches_;  // root: one per folder of the paths
  std::mutex written_mu_;
  std::vector<std::string> real_paths_;         // root: the paths' real paths, for what the watches keep
  std::map<std::string, std::string> written_;  // real path -> its digest after the command's last write ("": removed)
  uint64_t notes_ = 0;
};

}  // namespace faultline
