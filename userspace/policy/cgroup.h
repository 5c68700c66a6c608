// A throw-away cgroup v2 for a command: created, joined, emptied and removed.
#pragma once

#include <string>
#include <sys/types.h>

#include "loader/fd.h"
#include "loader/result.h"

namespace faultline {

class ScopedCgroup {
 public:
  // Creates <cgroup2 mount>/<name>.
  [[nodiscard]] static Result<ScopedCgroup> create(const std::string& name);
  ScopedCgroup(ScopedCgroup&& o) noexcept;
  ScopedCgroup& operator=(ScopedCgroup&&) = delete;
  ScopedCgroup(const ScopedCgroup&) = delete;
  ~ScopedCgroup();  // kills what is left inside, then removes the cgroup

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] int fd() const { return fd_.get(); }
  // Moves a process (0: the caller) into the cgroup.
  [[nodiscard]] Status join(pid_t pid) const;

 private:
  ScopedCgroup(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  UniqueFd fd_;
};

// An existing cgroup v2 directory (relative to the mount or absolute), opened.
[[nodiscard]] Result<UniqueFd> open_cgroup(const std::string& path, std::string* resolved = nullptr);

// The cgroup v2 path of a process, from /proc/PID/cgroup ("0::/path").
[[nodiscard]] Result<std::string> cgroup_of_pid(pid_t pid);

}  // namespace faultline
