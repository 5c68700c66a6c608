// What the enforcement tests stand on, beyond selftests/lib: faultctl children
// that end politely, unique names for namespaces and cgroups, the RESULT lines of
// fl_probe, loopback peers, and the fixture.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "selftests/lib/child_process.h"
#include "selftests/lib/netns_pair.h"
#include "selftests/lib/test_cgroup.h"

namespace flenf {

using namespace std::chrono_literals;
using fltest::Millis;

// FLENF_FAULTCTL runs the suite against another faultctl (an installed one, or a
// stand-in that enforces nothing, to see that the tests fail).
inline const std::string kFaultctl = std::getenv("FLENF_FAULTCTL") ? std::getenv("FLENF_FAULTCTL") : FAULTCTL_PATH;
inline const std::string kProbe = PROBE_PATH;
inline const std::string kPython = ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";

using fltest::cgroup2_mount;
using fltest::ChildProcess;
using fltest::CommandResult;
using fltest::ExitStatus;
using fltest::ip;
using fltest::Netns;
using fltest::remove_cgroup;
using fltest::SpawnOptions;
using fltest::Stream;
using fltest::TestCgroup;
using fltest::VethEnd;
using fltest::VethPair;

// A child of these tests: it ends politely when its object dies (SIGTERM, which
// faultctl forwards to its command before it cleans up; SIGKILL 3 s later), and
// the pid of a faultctl is remembered for leftover_faultctl_cgroups().
[[nodiscard]] ChildProcess spawn(const std::vector<std::string>& argv, SpawnOptions o = {});
// The same, run to its end; SIGKILL at the deadline (reported as killed).
[[nodiscard]] CommandResult run(const std::vector<std::string>& argv, Millis timeout = 30s, SpawnOptions o = {});

// "flenf<pid>x<n><tag>": unique per run and per call; short enough for a device.
[[nodiscard]] std::string unique_name(const std::string& tag);

// A veth pair on 198.18.<subnet>.0/24 between two namespaces: side 'a' is .1,
// side 'b' is .2; the device names are unique per run.
[[nodiscard]] std::string veth_addr(int subnet, char side);
[[nodiscard]] VethEnd veth_end(int subnet, char side);

// Cgroups that faultctl processes started by this test binary made and left
// behind (faultctl names them faultline-<what>-<its pid>). Other engineers' runs
// on the same machine are not ours to judge, so only our pids count.
[[nodiscard]] std::set<std::string> leftover_faultctl_cgroups();
// Forget the faultctl pids seen so far (each test starts clean).
void forget_faultctl_pids();

// fl_probe output: label -> (outcome -> count), e.g. "tcp 198.18.0.1:80" -> {ECONNREFUSED: 1}.
using Counts = std::map<std::string, long>;
[[nodiscard]] std::map<std::string, Counts> results(const std::string& out);
[[nodiscard]] std::string show(const Counts& c);
[[nodiscard]] long count_of(const Counts& c, const std::string& key);
// fl_probe output split at each WAITING line: the results of each phase.
[[nodiscard]] std::vector<std::map<std::string, Counts>> phases(const std::string& out);
// Waits until the child has printed `line` n times (10 s at most).
[[nodiscard]] bool wait_lines(ChildProcess& c, const std::string& line, int n);

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
// the test and is removed), and the private state goes. Test files derive a
// fixture named for their feature from it (GuardTest, TopTest, ...).
class EnforceTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::string state_dir_;   // FAULTLINE_RUN_DIR is state_dir_ + "/run"
  std::string bpffs_root_;  // FAULTLINE_BPFFS_ROOT
};

// A test that applies policy files: each file() is written under /tmp and
// removed at the end, and the applied policy is deleted before the pins go.
class PolicyFileTest : public EnforceTest {
 protected:
  void TearDown() override;
  // The path of a new policy file holding text.
  std::string file(const std::string& text);
  std::vector<std::string> files_;
};

}  // namespace flenf
