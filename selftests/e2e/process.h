// Child processes for the e2e tests: spawn with extra environment, read stdout
// line by line, wait with a deadline, signal. A child never outlives the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fle2e {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

struct ExitStatus {
  bool exited = false;  // false: killed by a signal
  int code = -1;
  int signal = 0;

  [[nodiscard]] bool is(int want) const { return exited && code == want; }
  [[nodiscard]] std::string str() const;
};

class Process {
 public:
  // argv[0] is a path or a name found on PATH. extra_env is KEY=VALUE added to ours.
  // Must be called from the test's main thread: the child is killed when that
  // thread dies (PR_SET_PDEATHSIG), so a crashed test leaves no process behind.
  [[nodiscard]] static Process spawn(const std::vector<std::string>& argv,
                                     const std::vector<std::string>& extra_env = {});

  Process(Process&& o) noexcept;
  Process& operator=(Process&& o) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();  // SIGKILL and reap if still running

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] bool running();

  // The next stdout line satisfying pred (lines before it are consumed), or nothing
  // when the deadline passes or the process exits first.
  [[nodiscard]] std::optional<std::string> wait_line(const std::function<bool(const std::string&)>& pred,
                                                     Millis timeout);
  [[nodiscard]] std::optional<std::string> wait_line_starting(const std::string& prefix, Millis timeout);

  // Reaps the process; nothing if it is still running at the deadline.
  [[nodiscard]] std::optional<ExitStatus> wait(Millis timeout);
  // Non-blocking variant: the exit status if the process has ended.
  [[nodiscard]] std::optional<ExitStatus> poll_exit();

  void signal(int sig) const;
  void kill_and_reap();

  [[nodiscard]] const std::string& out() const { return out_; }
  [[nodiscard]] const std::string& err() const { return err_; }
  // Command line, status and everything it printed: for failure messages.
  [[nodiscard]] std::string describe() const;

 private:
  Process() = default;
  void pump(int timeout_ms);
  void close_pipes();
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string cmdline_;
  std::string out_;
  std::string err_;
  size_t line_pos_ = 0;
  std::optional<ExitStatus> status_;
};

struct CommandResult {
  ExitStatus status;
  std::string out;
  std::string err;
  std::string cmdline;
  [[nodiscard]] std::string describe() const;
};

// Runs to completion (SIGKILL at the deadline, reported as killed).
[[nodiscard]] CommandResult run_command(const std::vector<std::string>& argv,
                                        const std::vector<std::string>& extra_env = {}, Millis timeout = 20s);

// CLOCK_MONOTONIC in nanoseconds.
[[nodiscard]] uint64_t now_ns();

}  // namespace fle2e
