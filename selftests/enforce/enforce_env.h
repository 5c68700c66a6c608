// What the enforcement tests stand on: child processes with captured output,
// throw-away network namespaces and cgroups (unique names, removed afterwards),
// and the RESULT lines of fl_probe.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace flenf {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// FLENF_FAULTCTL runs the suite against another faultctl (an installed one, or a
// stand-in that enforces nothing, to see that the tests fail).
inline const std::string kFaultctl = std::getenv("FLENF_FAULTCTL") ? std::getenv("FLENF_FAULTCTL") : FAULTCTL_PATH;
inline const std::string kProbe = PROBE_PATH;

// Root is needed for every test here (cgroups, BPF, namespaces): skip loudly.
#define FLENF_REQUIRE_ROOT()                                                                   \
  do {                                                                                         \
    if (::geteuid() != 0) {                                                                    \
      std::fprintf(stderr, "*** SKIPPED %s: needs root (cgroups, BPF programs, netns) ***\n", \
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());           \
      GTEST_SKIP() << "needs root";                                                            \
    }                                                                                          \
  } while (0)

struct Exit {
  bool exited = false;  // false: killed by a signal
  int code = -1;
  int sig = 0;
  [[nodiscard]] bool is(int want) const { return exited && code == want; }
  [[nodiscard]] std::string str() const;
};

struct SpawnOptions {
  std::string cgroup;       // a cgroup v2 directory the child joins before exec
  bool stdin_pipe = false;  // else stdin is /dev/null
};

// A child process whose stdout and stderr are collected; killed (SIGTERM, then
// SIGKILL) and reaped when the object dies, so no test leaves one behind.
class Child {
 public:
  [[nodiscard]] static Child spawn(const std::vector<std::string>& argv, const SpawnOptions& o = {});
  Child(Child&& o) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  ~Child();

  [[nodiscard]] pid_t pid() const { return pid_; }
  // Reads until `needle` shows in stdout (stderr if from_err); false at the
  // deadline or when the process ends first.
  [[nodiscard]] bool wait_for(const std::string& needle, Millis timeout, bool from_err = false);
  // The same, on stdout or stderr.
  [[nodiscard]] bool wait_for_either(const std::string& needle, Millis timeout);
  void write_stdin(const std::string& s);
  void close_stdin();
  [[nodiscard]] std::optional<Exit> wait(Millis timeout);
  void stop();  // SIGTERM, a grace period, SIGKILL; reaps

  [[nodiscard]] const std::string& out() const { return out_; }
  [[nodiscard]] const std::string& err() const { return err_; }
  [[nodiscard]] std::string describe() const;

 private:
  Child() = default;
  void pump(int timeout_ms);
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1, in_fd_ = -1;
  std::string cmdline_, out_, err_;
  std::optional<Exit> exit_;
};

struct Outcome {
  Exit exit;
  std::string out, err, cmdline;
  [[nodiscard]] std::string describe() const;
};

// Runs to the end; SIGKILL at the deadline (reported as killed).
[[nodiscard]] Outcome run(const std::vector<std::string>& argv, Millis timeout = 30s, const SpawnOptions& o = {});

// "flenf<pid>x<n><tag>": unique per run and per call; short enough for a device.
[[nodiscard]] std::string unique_name(const std::string& tag);

// Runs `ip ARGS...`; throws std::runtime_error with its stderr if it fails.
void ip(const std::vector<std::string>& args);

// A network namespace with lo up. With local_ranges, every address of
// 198.18.0.0/15 and 2001:2::/48 is local on lo (like 127/8): a TCP connect to a
// port nobody listens on is refused at once, so "allowed" reads ECONNREFUSED.
class Netns {
 public:
  explicit Netns(const std::string& tag, bool local_ranges = true);
  ~Netns();
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] uint32_t inode() const;

 private:
  std::string name_;
};

// A veth pair between two namespaces: a gets 198.18.N.1/24, b 198.18.N.2/24.
class VethPair {
 public:
  VethPair(const Netns& a, const Netns& b, int subnet);
  ~VethPair();
  VethPair(const VethPair&) = delete;
  VethPair& operator=(const VethPair&) = delete;
  [[nodiscard]] std::string addr_a() const { return "198.18." + std::to_string(subnet_) + ".1"; }
  [[nodiscard]] std::string addr_b() const { return "198.18." + std::to_string(subnet_) + ".2"; }
  [[nodiscard]] const std::string& dev_a() const { return dev_a_; }

 private:
  std::string ns_a_, dev_a_;
  int subnet_;
};

// A cgroup v2 of our own; its members are killed and it is removed on destruction.
class Cgroup {
 public:
  explicit Cgroup(const std::string& tag);
  ~Cgroup();
  Cgroup(const Cgroup&) = delete;
  Cgroup& operator=(const Cgroup&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }      // absolute
  [[nodiscard]] std::string relative() const;                           // below the mount
  [[nodiscard]] std::vector<pid_t> procs() const;

 private:
  std::string path_;
};

[[nodiscard]] const std::string& cgroup2_mount();
// Cgroups that faultctl processes started by this test binary made and left
// behind (faultctl names them faultline-<what>-<its pid>). Other engineers' runs
// on the same machine are not ours to judge, so only our pids count.
[[nodiscard]] std::set<std::string> leftover_faultctl_cgroups();
// Forget the faultctl pids seen so far (each test starts clean).
void forget_faultctl_pids();
// Kills what is in a cgroup faultctl left behind and removes it (test clean-up).
void remove_cgroup(const std::string& path);

// fl_probe output: label -> (outcome -> count), e.g. "tcp 198.18.0.1:80" -> {ECONNREFUSED: 1}.
using Counts = std::map<std::string, long>;
[[nodiscard]] std::map<std::string, Counts> results(const std::string& out);
[[nodiscard]] std::string show(const Counts& c);
[[nodiscard]] long count_of(const Counts& c, const std::string& key);

// A loopback UDP receiver on 127.0.0.1 in this (the test's) process, outside any
// cgroup under test: counts datagrams and bytes on a thread.
class UdpReceiver {
 public:
  UdpReceiver();
  ~UdpReceiver();
  UdpReceiver(const UdpReceiver&) = delete;
  UdpReceiver& operator=(const UdpReceiver&) = delete;
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] long datagrams() const;
  [[nodiscard]] long bytes() const;

 private:
  struct State;
  State* s_;
  uint16_t port_ = 0;
};

// A TCP listener on 127.0.0.1 (or ::1) in this process that counts accepted
// connections and closes them; with http, it first answers a request with 200 "hello".
class TcpServer {
 public:
  explicit TcpServer(bool v6 = false, bool http = false);
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] long accepted() const;

 private:
  struct State;
  State* s_;
  uint16_t port_ = 0;
};

// The base fixture: root check; a private state folder (FAULTLINE_RUN_DIR) and
// bpffs root (FAULTLINE_BPFFS_ROOT) for every faultctl the test runs, so that
// status, abort --all and pins never meet a real install's or another test's;
// after the test, no cgroup of a faultctl it ran may be left (one that is fails
// the test and is removed), and the private state goes.
class EnforceTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::string state_dir_;    // FAULTLINE_RUN_DIR is state_dir_ + "/run"
  std::string bpffs_root_;   // FAULTLINE_BPFFS_ROOT
};

}  // namespace flenf
