// `faultctl guard --watch-fs [--watch-path DIR]`: the file watch
// (userspace/guard/fs_watch.h) started for the command, each change said on
// stderr and kept in the request guard's activity log (kind fs), the summary
// at exit.
#pragma once

#include <sys/types.h>

#include <iosfwd>
#include <memory>
#include <string>

#include "base/result.h"
#include "userspace/guard/command_tree.h"
#include "userspace/guard/fs_gate.h"
#include "userspace/guard/fs_watch.h"

namespace faultline {

class GuardJudge;

struct GuardFsWatchOptions {
  bool enabled = false;
  std::string path;          // --watch-path ("": the working folder)
  std::string activity_log;  // the guard's own file, never reported
};

class GuardFsWatch {
 public:
  // Before the command is forked. With judge: changes go to its activity log.
  [[nodiscard]] static Result<std::unique_ptr<GuardFsWatch>> start(const GuardFsWatchOptions& o, GuardJudge* judge,
                                                                   std::ostream& log);
  // Once the command is forked (before it is let go): its pid, the root of
  // the tree whose events count.
  void forked(pid_t pid);
  // After the command exited: the rest said, then the summary line.
  void finish(std::ostream& log);

 private:
  GuardFsWatch() = default;
  std::unique_ptr<CommandTree> tree_;  // fanotify only; used by the watch's thread
  std::unique_ptr<FsWatch> watch_;
};

// --enforce-fs: the file gate, each denied open said on stderr and kept in
// the activity log (with judge), and its reaper watching for our death.
// Before the command is forked.
[[nodiscard]] Result<std::unique_ptr<FsGate>> start_fs_gate(FsGateOptions o, bool enforce, GuardJudge* judge,
                                                            std::ostream& log);
void print_fs_gate_summary(const FsGate& gate, std::ostream& log);

}  // namespace faultline
