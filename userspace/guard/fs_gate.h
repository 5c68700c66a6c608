// The file gate of `faultctl guard --enforce-fs`: every open and exec of the
// guarded command judged before it happens, by fanotify permission events
// (FAN_OPEN_PERM, FAN_OPEN_EXEC_PERM) on the mounts of a mount namespace
// made for the command alone (so no process outside it ever waits on us).
// Monitor: a denied open is reported and goes ahead; enforcing: it fails
// with EPERM.
//
// fanotify fails open: when the group's last fd closes, whatever waits is
// let through. So a reaper process holds a copy of the fd, and when the
// guard dies without saying goodbye it kills the command's cgroup first.
//
// Limits, said in docs/gates.md: root only (a mount namespace, fanotify's
// permission classes); mounts the command makes after it started are not
// marked; a root command that enters another mount namespace leaves the gate.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

// A file whose execution is refused (--fs-deny-exec), by what it is: its
// inode, and its content's SHA-256 (a copy of it elsewhere is refused too).
struct DeniedExecutable {
  std::string given;  // as the operator wrote it
  std::string path;   // resolved (symbolic links followed)
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t size = 0;
  std::string sha256;
};
// Resolves and hashes PATH; an error naming it when it is no regular file.
[[nodiscard]] Result<DeniedExecutable> denied_executable(const std::string& path);

struct FsGateOptions {
  bool enforce = false;
  std::vector<std::string> deny;            // --fs-deny: a path containing one is denied
  std::vector<DeniedExecutable> deny_exec;  // --fs-deny-exec: never run, never opened
  bool default_deny = false;                // --fs-default-deny: what no --fs-allow names is denied
  std::vector<std::string> allow;           // --fs-allow
  // Called on the gate's thread for each open that a rule denies (enforcing:
  // refused; monitor: let through).
  std::function<void(const struct FsDecision&)> on_denied;
};

struct FsDecision {
  int pid = 0;
  std::string path;   // the file opened, resolved (as the kernel names it)
  bool exec = false;  // an exec (or the loader mapping a program)
  std::string rule;   // "--fs-deny SUBSTR", "--fs-deny-exec PATH (same content)", "default"
  bool blocked = false;
};

// The rule that denies this open, "" when none does. Exposed for tests.
[[nodiscard]] std::string fs_rule_for(const FsGateOptions& o, const std::string& path);

class FsGate {
 public:
  // Before the fork: the fanotify group and the pipes the child syncs on.
  [[nodiscard]] static Result<std::unique_ptr<FsGate>> create(FsGateOptions opts);
  ~FsGate();
  FsGate(const FsGate&) = delete;
  FsGate& operator=(const FsGate&) = delete;

  // In the child, right before its exec (HeldChild's prepare): a mount
  // namespace of its own (every mount private), then it waits until the
  // parent has marked its mounts. Async-signal-safe; false if it failed.
  [[nodiscard]] bool prepare_in_child() const;
  // In the parent, after the fork and before the child is released: the
  // thread that marks the child's mounts, then answers every open.
  void serve(pid_t child);
  // A process of ours that holds the group's fd and, if we die, writes 1 to
  // kill_file (the command's cgroup.kill, relative to the cgroup v2 root
  // opened as cgroup_root) before it lets go. Before the fork of the
  // command (it must not hold the command's pipes).
  [[nodiscard]] Status start_reaper(int cgroup_root, const std::string& kill_file);
  // After the command is gone: the reaper told to leave without killing.
  void stop();

  [[nodiscard]] uint64_t judged() const { return judged_.load(); }
  [[nodiscard]] uint64_t denied() const { return denied_.load(); }
  [[nodiscard]] uint64_t mounts() const { return mounts_.load(); }
  [[nodiscard]] bool enforce() const { return opts_.enforce; }

 private:
  explicit FsGate(FsGateOptions opts) : opts_(std::move(opts)) {}
  void run(pid_t child);
  [[nodiscard]] bool mark_mounts(pid_t child);
  void answer(int event_fd, uint64_t mask, pid_t pid);
  [[nodiscard]] std::string exec_rule(int fd, const struct stat& st);

  FsGateOptions opts_;
  UniqueFd fan_;
  UniqueFd ready_[2];     // the child says its namespace is made
  UniqueFd ack_[2];       // we say its mounts are marked ('y') or not ('n')
  UniqueFd stop_[2];      // ends the thread
  UniqueFd reaper_life_;  // the reaper's EOF: we are gone
  pid_t reaper_ = 0;
  std::thread thread_;
  std::atomic<uint64_t> judged_{0}, denied_{0}, mounts_{0};
};

}  // namespace faultline
