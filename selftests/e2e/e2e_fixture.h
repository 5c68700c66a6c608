// The fixture every e2e test uses: fresh test hosts, a private bpffs root, the
// real faultctl and fl-testhost binaries, and a check that nothing is left behind.
// Parametrised by the attach path ("tcx" or "tc").
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernel_state.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/clock.h"
#include "selftests/lib/netns_pair.h"
#include "udp_probe.h"

namespace fle2e {

using fltest::ChildProcess;
using fltest::CommandResult;
using fltest::ExitStatus;
using fltest::Millis;
using fltest::monotonic_ns;
using fltest::run_command;
using namespace std::chrono_literals;

// The test hosts: network namespaces a (the client, where faults are applied)
// and b (the servers), joined by a veth pair, with addresses from the
// benchmarking range 198.18.0.0/15 that exist only inside them.
constexpr const char* kAddrA = "198.18.0.1";
constexpr const char* kAddrB = "198.18.0.2";
constexpr const char* kAddrB2 = "198.18.0.3";  // b's neighbour address, never targeted
constexpr const char* kDevA = "fla";
constexpr const char* kDevB = "flb";

constexpr uint16_t kHttpPort = 8080;
constexpr uint16_t kEchoPort = 7007;
constexpr uint16_t kSinkPort = 9000;
constexpr uint16_t kTcpSinkPort = 9001;
constexpr uint16_t kDnsPort = 53;

class E2eTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;

  [[nodiscard]] const std::string& attach() const { return GetParam(); }
  [[nodiscard]] const fltest::NetnsPair& net() const { return *net_; }
  [[nodiscard]] const std::string& bpffs_root() const { return bpffs_root_; }
  // FAULTLINE_BPFFS_ROOT=<our root>: in the environment of every faultctl we start.
  [[nodiscard]] std::vector<std::string> faultctl_env() const { return {"FAULTLINE_BPFFS_ROOT=" + bpffs_root_}; }

  // faultctl ARGS..., to completion.
  [[nodiscard]] CommandResult faultctl(const std::vector<std::string>& args, Millis timeout = 20s) const;
  // `faultctl run KIND --netns <a> --attach <param> --json ARGS...`, in the background.
  [[nodiscard]] ChildProcess start_run(const std::string& kind, const std::vector<std::string>& args) const;
  // Waits for the run's "started" event; nothing (and a test failure) if it never comes.
  // Also checks the kernel: a program of ours is attached to host a's device
  // through the attach path under test (and, for TCX, no clsact was needed).
  [[nodiscard]] std::optional<nlohmann::json> wait_started(ChildProcess& run);
  // The "started" line alone (15 s at most), without wait_started()'s checks of
  // where the programs are; a test failure when it never comes.
  [[nodiscard]] static std::optional<nlohmann::json> started_line(ChildProcess& run);
  // The run's "ended" event after it exits (nothing if absent).
  [[nodiscard]] static std::optional<nlohmann::json> ended_event(ChildProcess& run);

  // An fl-testhost server on host b (or a), kept until TearDown; waits for "ready".
  void start_server(const std::vector<std::string>& args, bool on_b = true);
  // An fl-testhost client run on host a, to completion.
  [[nodiscard]] CommandResult testhost_on_a(const std::vector<std::string>& args, Millis timeout = 20s) const;
  [[nodiscard]] ChildProcess spawn_testhost_on_a(const std::vector<std::string>& args) const;
  [[nodiscard]] ChildProcess spawn_testhost_on_b(const std::vector<std::string>& args) const;
  // ping from host a; returns the percentage of echoes lost (-1 if ping printed no summary).
  [[nodiscard]] double ping_loss(const std::string& addr, int count, const std::string& interval) const;

  // Pins under our root, our programs, clsact on the test devices: all must be gone.
  // Polls up to 3 s (the kernel frees programs after an RCU grace period).
  void expect_nothing_left(const std::string& when);
  [[nodiscard]] std::vector<NetfaultProg> our_programs() const;
  // True if a program of ours is attached to host a's device through the path under
  // test. A shared machine can have another `faultctl uninstall` sweep it away mid-test.
  [[nodiscard]] bool attached_via_path() const;
  // When the last wait_started() saw the "started" line (CLOCK_MONOTONIC ns).
  [[nodiscard]] uint64_t started_at() const { return started_at_; }

 private:
  std::unique_ptr<fltest::NetnsPair> net_;
  std::string bpffs_root_;
  std::vector<ChildProcess> servers_;
  uint64_t started_at_ = 0;
};

// A percentage for messages: "31.5%".
[[nodiscard]] std::string pct(double v);

// The last line of text that parses as a JSON object (an empty object if none).
[[nodiscard]] nlohmann::json last_json(const std::string& text);

// INSTANTIATE with this: every test runs on both attach paths.
std::string attach_name(const ::testing::TestParamInfo<std::string>& info);

#define FLE2E_ON_BOTH_ATTACH_PATHS(Suite)                                                           \
  INSTANTIATE_TEST_SUITE_P(Attach, Suite, ::testing::Values(std::string("tcx"), std::string("tc")), \
                           ::fle2e::attach_name)

}  // namespace fle2e
