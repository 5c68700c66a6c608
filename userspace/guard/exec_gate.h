// The exec gate of `faultctl guard --block-dangerous`: every execve and
// execveat of the guarded command and of everything it starts is handed to
// this process (seccomp user notification) and judged by command_risks()
// before it happens. Monitor: a risky exec is reported and goes ahead;
// enforcing: it fails with EPERM and never runs. The judged words are the
// path the kernel runs and argv[1...]: argv[0] cannot disguise the program.
//
// Limits, said in docs/gates.md: a process that changes its argv between our
// read and the kernel's (another thread racing its own exec) is judged on
// what we read; what a script file runs is judged exec by exec, never the
// file's text; as a user, the filter needs no_new_privs, so setuid programs
// (sudo) run without their privileges under the gate.
#pragma once

#include <linux/filter.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/guard/command_risk.h"

namespace faultline {

// One judged exec.
struct ExecJudgement {
  int pid = 0;
  std::vector<std::string> words;  // the path run, then argv[1...]
  std::vector<CommandRisk> risks;  // empty: nothing risky
  bool blocked = false;            // failed with EPERM
  std::string unreadable;          // why the words could not be read ("" when they were)
};

// The judged words space-joined ("/usr/bin/rm -rf /srv"), or "pid N: why"
// when they could not be read: the activity log's path, a grant's key.
[[nodiscard]] std::string exec_command_text(const ExecJudgement& j);

// How a held exec is answered: true lets it run, false fails it with EPERM.
// Callable once, from any thread, at any time (after the command is gone it
// does nothing).
using ExecAnswer = std::function<void(bool allow)>;

struct ExecGateOptions {
  bool enforce = false;
  // Called on the gate's thread for every exec that has a risk or could not
  // be read and is not held (the others go ahead unreported).
  std::function<void(const ExecJudgement&)> on_flagged;
  // Called on the gate's thread for every exec judged, before its answer
  // (quick: the process waits in its execve).
  std::function<void(const ExecJudgement&)> on_exec;
  // --approve-dangerous, enforcing: a flagged exec is handed here instead of
  // refused, and waits (the process in its execve) until answered. Other
  // execs are judged meanwhile.
  std::function<void(const ExecJudgement&, ExecAnswer)> hold;
};

class ExecGate {
 public:
  // Before the fork: the socket pair that carries the filter's fd.
  [[nodiscard]] static Result<std::unique_ptr<ExecGate>> create(ExecGateOptions opts);
  ~ExecGate();
  ExecGate(const ExecGate&) = delete;
  ExecGate& operator=(const ExecGate&) = delete;

  // In the child, right before its exec (HeldChild's prepare): the filter
  // installed and its fd sent to the parent. False if it could not be.
  [[nodiscard]] bool install_in_child() const;

  // In the parent, after the fork and before the child is released: the
  // child's end of the socket closed here, and the thread that takes the
  // filter's fd and answers every exec started (the child's own first exec
  // is judged too, so it must be served before release() waits for it).
  void serve();

  // Once the command and its descendants are gone: whether the filter was
  // ever installed (false: the child failed before its exec).
  [[nodiscard]] bool installed() const { return installed_.load(); }
  [[nodiscard]] uint64_t judged() const { return judged_.load(); }
  [[nodiscard]] uint64_t flagged() const { return flagged_.load(); }
  [[nodiscard]] uint64_t blocked() const { return blocked_->load(); }
  [[nodiscard]] uint64_t held() const { return held_.load(); }

 private:
  explicit ExecGate(ExecGateOptions opts) : opts_(std::move(opts)) {}
  void run(const std::shared_ptr<UniqueFd>& notify);

  ExecGateOptions opts_;
  std::vector<sock_filter> filter_;  // made before the fork
  UniqueFd ours_, theirs_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, installed_{false};
  std::atomic<uint64_t> judged_{0}, flagged_{0}, held_{0};
  // Shared with the answers of held execs, which may come after the gate is gone.
  std::shared_ptr<std::atomic<uint64_t>> blocked_ = std::make_shared<std::atomic<uint64_t>>(0);
};

}  // namespace faultline
