// Helpers for the tests that run inside the qemu guest: run a command, keep one
// in the background with its output in a file, and drive fl-vmprobe processes.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace flvm {

// Where the guest's /init put the binaries (FL_VM_BIN overrides).
[[nodiscard]] std::string bin(const std::string& name);

struct Ran {
  int code = -1;  // exit code, 128 + signal, or -1 on timeout
  std::string out;  // stdout and stderr together
};

// Runs argv (a path or a name on PATH) to completion.
[[nodiscard]] Ran run(const std::vector<std::string>& argv, int timeout_ms = 60'000);
// argv inside network namespace /run/netns/NS.
[[nodiscard]] Ran run_in(const std::string& ns, const std::vector<std::string>& argv, int timeout_ms = 60'000);

// A command in the background; stdout and stderr go to a file. Killed when destroyed.
class Background {
 public:
  explicit Background(const std::vector<std::string>& argv);
  Background(Background&& o) noexcept;
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  ~Background();

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string out() const;
  // Waits until the output contains needle; false at the deadline or if the process exits first.
  [[nodiscard]] bool wait_for(const std::string& needle, int timeout_ms);
  // The exit code (128 + signal if killed), or nothing at the deadline.
  [[nodiscard]] std::optional<int> wait(int timeout_ms);
  void signal(int sig) const;

 private:
  pid_t pid_ = -1;
  std::string file_;
  std::optional<int> code_;
};

// An fl-vmprobe `serve` process: one operation per call, answered with OK or an
// errno name; "EOF" when the process went away (an exec that succeeded).
class Probe {
 public:
  // cgroup: a directory under the cgroup2 mount the probe joins before it starts; "" = ours.
  explicit Probe(const std::string& cgroup = "");
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;
  ~Probe();

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string call(const std::string& op, int timeout_ms = 20'000);

 private:
  pid_t pid_ = -1;
  int sock_ = -1;
};

// A cgroup v2 directory for a test, removed (after killing its members) at the end.
class TestCgroup {
 public:
  explicit TestCgroup(const std::string& rel);  // relative to the cgroup2 mount
  ~TestCgroup();
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

[[nodiscard]] std::string cgroup2_mount();

// ping from NS: per-echo RTTs in ms and the share lost (percent).
struct PingResult {
  std::vector<double> rtt_ms;
  int sent = 0;
  int received = 0;
  double loss() const { return sent > 0 ? 100.0 * (sent - received) / sent : -1; }
  std::string raw;
};
[[nodiscard]] PingResult ping(const std::string& ns, const std::string& addr, int count, const std::string& interval);

[[nodiscard]] double mean(const std::vector<double>& v);
[[nodiscard]] double stddev(const std::vector<double>& v);
// The q-th percentile (0-100), nearest rank.
[[nodiscard]] double percentile(std::vector<double> v, double q);

void write_file(const std::string& path, const std::string& text);
[[nodiscard]] std::string read_file(const std::string& path);

}  // namespace flvm
