// Child processes for every test tier: spawn with extra environment, a cgroup to
// join and stdin on a pipe; read what they print while they run; wait with a
// deadline; end them. A child never outlives its ChildProcess, nor the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fltest {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// How a child ended.
struct ExitStatus {
  bool exited = false;  // false: killed by a signal (or not ended)
  int code = -1;        // the exit code; -1 unless exited
  int signal = 0;       // the signal that killed it

  [[nodiscard]] bool is(int want) const { return exited && code == want; }
  [[nodiscard]] bool killed_by(int sig) const { return !exited && signal == sig; }
  [[nodiscard]] std::string str() const;  // "exit code 2", "killed by signal 9 (Killed)"
};

// Where a child's stdout and stderr go.
enum class Output {
  kPipes,  // pipes, read while the test waits on the child
  kFiles,  // unlinked temporary files: a child that prints a lot never blocks
           // on a full pipe while the test is busy elsewhere
};

enum class Stream { kStdout, kStderr, kEither };

struct SpawnOptions {
  std::vector<std::string> env;  // KEY=VALUE, added to ours (replacing the same KEY)
  std::string cgroup;            // a cgroup v2 directory the child joins before exec
  bool stdin_pipe = false;       // else stdin is /dev/null
  Output output = Output::kPipes;
  bool merge_stderr = false;       // stderr into stdout, in order
  bool own_process_group = false;  // setpgid(0, 0): signals to our group do not reach it
  // How the child is ended when its ChildProcess dies: 0 is SIGKILL at once;
  // more is SIGTERM first and SIGKILL once this has passed (for a faultctl,
  // which forwards SIGTERM to its command and cleans up before it exits).
  Millis stop_grace = 0ms;
};

// A child run to its end.
struct CommandResult {
  ExitStatus status;
  std::string out;
  std::string err;
  std::string cmdline;
  [[nodiscard]] std::string describe() const;
};

class ChildProcess {
 public:
  // argv[0] is a path, or a name looked up on PATH and then /usr/sbin and /sbin
  // (where ip and tc live; a test runner's PATH may lack them). A program that
  // cannot be run ends the child with exit code 127 and a line on its stderr.
  // The child gets SIGKILL when the thread that spawned it ends
  // (PR_SET_PDEATHSIG): spawn from the test's main thread, so that a crashed
  // test leaves no process behind. Throws std::runtime_error if fork or a pipe fails.
  [[nodiscard]] static ChildProcess spawn(const std::vector<std::string>& argv, const SpawnOptions& o = {});

  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();  // stop() if still running

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] bool running();

  // Reaps the child: its status, or nothing if it still runs at the deadline.
  // Once it ended, what it printed is read to the end (up to 2 s more, should a
  // grandchild still hold the pipes).
  [[nodiscard]] std::optional<ExitStatus> wait(Millis timeout);
  // The same without waiting.
  [[nodiscard]] std::optional<ExitStatus> poll_exit();

  // Reads until `needle` shows in the stream; false at the deadline, or once the
  // child's output ended without it.
  [[nodiscard]] bool wait_for(const std::string& needle, Millis timeout, Stream s = Stream::kStdout);
  // The next stdout line satisfying pred (lines before it are consumed), or
  // nothing when the deadline passes or the child ends first.
  [[nodiscard]] std::optional<std::string> wait_line(const std::function<bool(const std::string&)>& pred,
                                                     Millis timeout);
  [[nodiscard]] std::optional<std::string> wait_line_starting(const std::string& prefix, Millis timeout);

  void write_stdin(const std::string& s);
  void close_stdin();
  void signal(int sig) const;
  // SIGKILL and reap.
  void kill_and_reap();
  // Closes stdin, then SIGTERM and up to `grace` for the child to exit, then
  // SIGKILL; reaps.
  void stop(Millis grace = 3000ms);

  // What it printed so far (read now, without waiting).
  [[nodiscard]] const std::string& out();
  [[nodiscard]] const std::string& err();
  // Command line, status and everything it printed: for failure messages.
  [[nodiscard]] std::string describe();

  // Waits for the end (SIGKILL at the deadline, then reported as killed) and
  // returns how it ended and everything it printed.
  [[nodiscard]] CommandResult finish(Millis timeout);

 private:
  ChildProcess() = default;
  void pump(int timeout_ms);
  [[nodiscard]] bool output_ended() const;
  void reaped(int wait_status);
  void drain();
  void close_fds();

  pid_t pid_ = -1;
  Output output_ = Output::kPipes;
  int out_fd_ = -1;  // pipe read end, or the unlinked file
  int err_fd_ = -1;
  int in_fd_ = -1;
  off_t out_off_ = 0;  // with files: how much has been read
  off_t err_off_ = 0;
  Millis stop_grace_ = 0ms;
  std::string cmdline_;
  std::string out_;
  std::string err_;
  size_t line_pos_ = 0;
  std::optional<ExitStatus> status_;
};

// Runs argv to completion; SIGKILL at the deadline (then reported as killed).
[[nodiscard]] CommandResult run_command(const std::vector<std::string>& argv, const SpawnOptions& o = {},
                                        Millis timeout = 30s);

// argv as an unprivileged user: through setpriv as nobody when the test runs
// as root (a guard "as any user"), unchanged otherwise.
[[nodiscard]] std::vector<std::string> as_nobody(std::vector<std::string> argv);

}  // namespace fltest
