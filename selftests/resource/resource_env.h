// The world a resource-fault test runs in: the real faultctl, a private state folder,
// target processes, a tmpfs, a cgroup, an HTTP service. Everything is undone at the end.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace flres {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

struct Outcome {
  int code = -1;   // exit code, -1 when killed by a signal
  int signal = 0;  // the signal that killed it
  std::string out, err, cmdline;
  [[nodiscard]] std::string describe() const;
};

// One faultctl process with stdout and stderr in files (nothing can block on a pipe).
class Faultctl {
 public:
  Faultctl(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& dir);
  Faultctl(Faultctl&&) = delete;
  ~Faultctl();  // SIGKILL and reap if still running

  [[nodiscard]] pid_t pid() const { return pid_; }
  // The first JSON line on stdout whose "event" is this one.
  [[nodiscard]] std::optional<nlohmann::json> wait_event(const std::string& event, Millis timeout);
  [[nodiscard]] std::optional<Outcome> wait(Millis timeout);
  void kill9();
  [[nodiscard]] std::string out() const;
  [[nodiscard]] std::string err() const;
  [[nodiscard]] std::string describe() const;

 private:
  pid_t pid_ = -1;
  std::string out_path_, err_path_, cmdline_;
  std::optional<Outcome> done_;
};

// A process whose progress can be read: it increments a shared counter every 2 ms.
class Counter {
 public:
  explicit Counter(const std::string& comm = "");
  ~Counter();
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] uint64_t value() const;
  [[nodiscard]] char state() const;  // /proc/PID/stat state
  // waitpid: how it ended, or nothing while it runs.
  [[nodiscard]] std::optional<int> ended_by_signal();

 private:
  pid_t pid_ = -1;
  volatile uint64_t* counter_ = nullptr;
  bool reaped_ = false;
};

// A small tmpfs: a file system to fill that is not the real disk.
class Tmpfs {
 public:
  Tmpfs(const std::string& path, const std::string& size);
  ~Tmpfs();
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] double use_percent() const;  // as df computes it
  [[nodiscard]] std::vector<std::string> files() const;

 private:
  std::string path_;
  bool mounted_ = false;
};

// A cgroup v2 directory of our own; its members are killed and it is removed at the end.
class TestCgroup {
 public:
  explicit TestCgroup(const std::string& name);
  ~TestCgroup();
  [[nodiscard]] const std::string& dir() const { return dir_; }
  void add(pid_t pid) const;
  [[nodiscard]] bool frozen() const;

 private:
  std::string dir_;
};

// An HTTP service on 127.0.0.1 whose answer (status, delay) the test decides per request.
class HttpServer {
 public:
  struct Reply {
    int status = 200;
    int delay_ms = 0;
  };
  // Listens on addr:0, inside the network namespace at netns_path if one is given.
  explicit HttpServer(std::function<Reply()> decide, const std::string& addr = "127.0.0.1",
                      const std::string& netns_path = "");
  ~HttpServer();
  [[nodiscard]] std::string url() const;
  [[nodiscard]] int requests() const { return requests_.load(); }

 private:
  void serve();
  int fd_ = -1;
  int port_ = 0;
  std::string addr_;
  std::function<Reply()> decide_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// Two network namespaces joined by a veth pair (198.19.213.1 in a, .2 in b), for
// recording packet faults. Removed, with the veth, at the end.
class NetnsPair {
 public:
  static constexpr const char* kAddrA = "198.19.213.1";
  static constexpr const char* kAddrB = "198.19.213.2";
  explicit NetnsPair(const std::string& prefix);
  ~NetnsPair();
  [[nodiscard]] const std::string& a() const { return a_; }
  [[nodiscard]] const std::string& b() const { return b_; }

 private:
  std::string a_, b_;
};

// Busy and total jiffies of one CPU from /proc/stat.
struct CpuTimes {
  uint64_t busy = 0, total = 0;
};
[[nodiscard]] CpuTimes cpu_times(int cpu);

[[nodiscard]] bool path_exists(const std::string& p);
[[nodiscard]] std::string read_file(const std::string& p);
[[nodiscard]] bool pid_alive(pid_t pid);  // exists and is not a zombie
[[nodiscard]] std::vector<nlohmann::json> json_lines(const std::string& text);
[[nodiscard]] std::string v2_mount();
void sleep_for(Millis d);

// Waits until pred holds; false at the deadline.
[[nodiscard]] bool eventually(const std::function<bool()>& pred, Millis timeout, Millis step = 20ms);

// Root only: skips loudly otherwise. Each test gets a private state folder and
// bpffs root, a 2s reaper grace, and leaves nothing behind: TearDown runs
// `faultctl abort --all` and fails the test if any state was left.
class ResourceTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  [[nodiscard]] Outcome run(const std::vector<std::string>& args, Millis timeout = 60s);
  [[nodiscard]] std::unique_ptr<Faultctl> start(const std::vector<std::string>& args);
  [[nodiscard]] std::vector<std::string> state_files() const;  // r*.json in the state folder
  [[nodiscard]] std::string unique(const std::string& what) const;
  // The state lock faultctl keeps beside bpffs, one file per root (loader/bpffs.cpp):
  // commands that touch packet state create it; a test that runs them removes it.
  void remove_bpffs_lock() const;

  std::string dir_;
  std::string bpffs_root_;  // FAULTLINE_BPFFS_ROOT: packet faults of a test never touch a live install
  std::vector<std::string> env_;
  static constexpr Millis kGrace = 2000ms;
};

}  // namespace flres
