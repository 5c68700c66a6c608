// The guarded command's process tree as the kernel's process connector tells
// it (fork and exit events, root only): which pid an fanotify event came from
// is the command's, even after that process has exited and been reaped.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_set>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

class CommandTree {
 public:
  // Listens to the process connector (needs CAP_NET_ADMIN and the initial
  // network namespace). Before the command is forked: its children's forks
  // must not be missed.
  [[nodiscard]] static Result<std::unique_ptr<CommandTree>> listen();
  CommandTree(const CommandTree&) = delete;
  CommandTree& operator=(const CommandTree&) = delete;

  // The command itself, once forked.
  void set_root(pid_t pid);
  // Whether pid (a process, not a thread) is the command or one of its
  // descendants. The connector's queue is read first, so a fork that came
  // before the event being judged is known. A pid the connector missed (its
  // queue overflowed) is looked up in /proc (its parent chain) while it lives.
  [[nodiscard]] bool contains(pid_t pid);
  // Fork events lost to a full queue (each a possible miss after its process exited).
  [[nodiscard]] uint64_t lost() {
    std::lock_guard lock(mu_);
    return lost_;
  }

 private:
  explicit CommandTree(UniqueFd sock) : sock_(std::move(sock)) {}
  void drain();
  [[nodiscard]] bool parent_chain_reaches_root(pid_t pid) const;

  std::mutex mu_;  // set_root() on the main thread, contains() on the watch's
  UniqueFd sock_;
  pid_t root_ = 0;
  std::set<pid_t> members_;
  // Exited members stay a while: their fanotify events may still be queued
  // (an event holds its pid, which cannot be reused meanwhile).
  std::map<pid_t, std::chrono::steady_clock::time_point> exited_;
  // Processes found not to be the command's: a filesystem mark sees every
  // process's changes, and most are someone else's. A pid leaves the set
  // when the command forks a process that reuses it.
  std::unordered_set<pid_t> outsiders_;
  uint64_t lost_ = 0;
};

}  // namespace faultline
