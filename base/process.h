// Processes as /proc shows them, and an identity that survives PID reuse.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/result.h"

namespace faultline {

// A PID alone can be reused by an unrelated process; the PID plus its start time
// (clock ticks after boot, /proc/PID/stat field 22) cannot. Every process a
// revert touches is checked against this first.
struct ProcessIdentity {
  int pid = 0;
  uint64_t start = 0;
  bool operator==(const ProcessIdentity&) const = default;
};

struct ProcessInfo {
  int pid = 0;
  int ppid = 0;
  char state = '?';    // R, S, D, T (stopped), t, Z (zombie), X, I
  uint64_t flags = 0;  // PF_* (PF_KTHREAD marks kernel threads)
  uint64_t utime = 0;  // clock ticks
  uint64_t stime = 0;
  uint64_t start = 0;
  std::string comm;

  [[nodiscard]] ProcessIdentity identity() const { return {pid, start}; }
  [[nodiscard]] bool kernel_thread() const;
  [[nodiscard]] bool stopped() const { return state == 'T' || state == 't'; }
};

[[nodiscard]] Result<ProcessInfo> read_process(int pid);

// The start time of a process (ProcessInfo::start), 0 when there is no such process.
[[nodiscard]] uint64_t process_start_time(int pid);

// Same PID, same start time, and not a zombie.
[[nodiscard]] bool is_alive(const ProcessIdentity& id);

// Every PID in /proc, ascending.
[[nodiscard]] std::vector<int> list_pids();

// The parent chain of pid up to PID 1 (pid itself excluded).
[[nodiscard]] std::vector<int> ancestors_of(int pid);

// The last path element of argv[0], "" for kernel threads and the unreadable.
[[nodiscard]] std::string argv0_basename(int pid);

// /proc/sys/kernel/random/boot_id: state written before a reboot refers to nothing alive.
[[nodiscard]] std::string boot_id();

// Closes every descriptor from 3 up except the ones listed: a forked helper must
// not keep a lock, a pipe or a mount busy on behalf of its parent.
void close_fds_except(std::initializer_list<int> keep);

}  // namespace faultline
