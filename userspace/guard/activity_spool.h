// The activity lines a guard has written but faultcp has not yet confirmed
// stored: a file in the guard's state folder, read back at start, so nothing
// is lost while faultcp is down or across a restart of either side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

// One spooled line: the activity line as written (with its newline), and the
// identity and seq that faultcp's stored_through is counted in.
struct SpooledLine {
  std::string identity;
  uint64_t seq = 0;
  std::string line;
};

// Appends are one write(2) on an O_APPEND descriptor (a process crash never
// leaves half a line but the last, which open() drops); not fsynced: the
// activity log itself is the durable record, the spool only what is owed to
// faultcp. Lines faultcp confirmed are dropped from memory at once and from
// the file when it empties, or rewritten (a sibling renamed over it) once the
// confirmed lines outnumber the rest, so a long outage costs linear work; a
// confirmed line still in the file after a crash is sent again, and faultcp
// counts it a duplicate. A sibling PATH.lock is held (flock) for the spool's
// life: one guard per spool.
// Thread-safe.
class ActivitySpool {
 public:
  [[nodiscard]] static Result<std::unique_ptr<ActivitySpool>> open(const std::string& path);
  ~ActivitySpool() = default;
  ActivitySpool(const ActivitySpool&) = delete;
  ActivitySpool& operator=(const ActivitySpool&) = delete;

  [[nodiscard]] Status append(SpooledLine line);
  // The oldest lines, at most max_entries of them and max_bytes together (one
  // line at least, whatever its size).
  [[nodiscard]] std::vector<SpooledLine> front(size_t max_entries, size_t max_bytes) const;
  // After faultcp answered a batch of the first `sent` lines: those of them
  // whose seq is at most their identity's stored_through leave the spool.
  // Returns how many left.
  [[nodiscard]] Result<size_t> drop(size_t sent, const std::map<std::string, uint64_t>& stored_through);
  // Drops the first line whatever faultcp said (one it refuses for good).
  [[nodiscard]] Status drop_first();
  [[nodiscard]] size_t size() const;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  ActivitySpool(std::string path, UniqueFd lock, UniqueFd fd, std::deque<SpooledLine> lines);
  [[nodiscard]] Status compact_locked();

  const std::string path_;
  mutable std::mutex mu_;
  UniqueFd lock_;
  UniqueFd fd_;
  std::deque<SpooledLine> lines_;  // what faultcp has not confirmed, oldest first
  size_t confirmed_in_file_ = 0;   // confirmed lines the file still holds before them
};

}  // namespace faultline
