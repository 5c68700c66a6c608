// A command started held: forked, waiting on a pipe until the parent has put it
// where it belongs (a cgroup, a seccomp filter), then let go to exec.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

class HeldChild {
 public:
  // Forks argv. In the child, prepare() runs after release() and right before
  // exec; false from it ends the child with 127. who prefixes the child's own
  // error line ("faultctl run syscall").
  [[nodiscard]] static Result<HeldChild> spawn(const std::vector<std::string>& argv, std::function<bool()> prepare,
                                               std::string who);
  HeldChild(HeldChild&& o) noexcept;
  HeldChild& operator=(HeldChild&&) = delete;
  HeldChild(const HeldChild&) = delete;
  ~HeldChild();  // a child never released, or not reaped, is killed and reaped

  [[nodiscard]] pid_t pid() const { return pid_; }
  // Lets the child go, and returns once it has exec'd (or died trying).
  [[nodiscard]] Status release();
  // The exit code once it has exited (128 + signal for a signal), without waiting.
  [[nodiscard]] std::optional<int> poll_exit();
  // Waits for the exit.
  [[nodiscard]] int wait();

 private:
  HeldChild(pid_t pid, UniqueFd go, UniqueFd execd) : pid_(pid), go_(std::move(go)), execd_(std::move(execd)) {}
  pid_t pid_ = -1;
  UniqueFd go_;     // write end: one byte lets the child go
  UniqueFd execd_;  // read end: EOF once the child exec'd (close-on-exec in the child)
  std::optional<int> exit_;
};

// The environment a child execs with: ours, with `set` added or replacing the
// variables of the same name. Built before the fork, because the child of a
// threaded process must not allocate; apply() (from the child's prepare) only
// points environ at it. Neither copied nor moved: environ points into it.
class ChildEnvironment {
 public:
  explicit ChildEnvironment(const std::vector<std::pair<std::string, std::string>>& set);
  ChildEnvironment(const ChildEnvironment&) = delete;
  ChildEnvironment& operator=(const ChildEnvironment&) = delete;
  void apply() const;

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};

// A wait status as a shell would report it: the exit code, or 128 + the signal.
[[nodiscard]] int exit_code_of_status(int status);

}  // namespace faultline
