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

#include "selftests/lib/child_process.h"
#include "selftests/lib/test_cgroup.h"

namespace flres {

using namespace std::chrono_literals;
using fltest::Millis;

using fltest::ChildProcess;
using fltest::CommandResult;
using fltest::ExitStatus;
using fltest::TestCgroup;

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

// The test hosts of packet-fault records: namespaces a and b joined by a veth pair.
constexpr const char* kAddrA = "198.19.213.1";
constexpr const char* kAddrB = "198.19.213.2";

// Busy and total jiffies of one CPU from /proc/stat.
struct CpuTimes {
  uint64_t busy = 0, total = 0;
};
[[nodiscard]] CpuTimes cpu_times(int cpu);

[[nodiscard]] bool path_exists(const std::string& p);
[[nodiscard]] std::string read_file(const std::string& p);
[[nodiscard]] bool pid_alive(pid_t pid);  // exists and is not a zombie
[[nodiscard]] std::vector<nlohmann::json> json_lines(const std::string& text);
// The first JSON line on a faultctl's stdout whose "event" is this one; nothing at
// the deadline or once it ended without one.
[[nodiscard]] std::optional<nlohmann::json> wait_event(ChildProcess& faultctl, const std::string& event,
                                                       Millis timeout);
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

  // faultctl ARGS... with the test's environment: to its end, or in the background.
  // Its output goes to files: a faultctl nobody reads never blocks on a pipe.
  [[nodiscard]] CommandResult run(const std::vector<std::string>& args, Millis timeout = 60s);
  [[nodiscard]] std::unique_ptr<ChildProcess> start(const std::vector<std::string>& args);
  [[nodiscard]] std::vector<std::string> state_files() const;  // r*.json in the state folder
  [[nodiscard]] std::string unique(const std::string& what) const;

  std::string dir_;
  std::string bpffs_root_;  // FAULTLINE_BPFFS_ROOT: packet faults of a test never touch a live install
  std::vector<std::string> env_;
  static constexpr Millis kGrace = 2000ms;
};

}  // namespace flres
