// faultctl uninstall after a crash (kill -9 mid-run): the kernel must be left
// with no netfault program at all, nothing pinned, no clsact on the devices.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include "e2e_fixture.h"
#include "loader/bpffs.h"
#include "selftests/lib/test_bpffs.h"

namespace fle2e {
namespace {

class Uninstall : public E2eTest {
 protected:
  // B's echo server, and a partition to B both ways by `faultctl run`, in effect.
  void start_partition() {
    start_server({"udp-echo", std::to_string(kEchoPort)});
    probe_.emplace(net().a(), kAddrB, kEchoPort);
    run_.emplace(start_run("partition", {"--target", kAddrB, "--direction", "both", "--duration", "60s"}));
    ASSERT_TRUE(wait_started(*run_));
    ASSERT_FALSE(probe_->reachable(200ms)) << "the partition is not in effect";
  }
  std::optional<UdpProbe> probe_;
  std::optional<ChildProcess> run_;
};

TEST_P(Uninstall, LeavesNoProgramPinOrQdiscBehind) {
  // The test wants no netfault program at all left in the kernel afterwards,
  // which another live state (a real install, another test's root) would keep.
  if (auto foreign = netfault_programs(); !foreign.empty()) {
    GTEST_SKIP() << "\n*** SKIPPED: another Faultline state is live on this machine (" << describe(foreign)
                 << "), and this test counts every netfault program. Run again when it is gone. ***";
  }
  ASSERT_NO_FATAL_FAILURE(start_partition());
  run_->signal(SIGKILL);
  ASSERT_TRUE(run_->wait(2s));
  ASSERT_FALSE(our_programs().empty()) << "the crashed run's programs should still be attached";
  if (attach() == "tc") {
    ASSERT_TRUE(has_clsact(net().a(), kDevA)) << qdiscs(net().a(), kDevA);
  }

  auto r = faultctl({"uninstall"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("uninstalled"), std::string::npos) << r.out;
  EXPECT_TRUE(probe_->reachable(100ms)) << "traffic must pass right after uninstall";

  // The kernel's own list, twice: through the bpf syscall, and through bpftool.
  std::vector<NetfaultProg> left;
  for (int i = 0; i < 60; ++i) {
    left = netfault_programs();
    if (left.empty()) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(left.empty()) << "netfault programs still loaded: " << describe(left);
  auto bpftool = run_command({"bpftool", "prog", "show"});
  ASSERT_TRUE(bpftool.status.is(0)) << bpftool.describe();
  EXPECT_EQ(bpftool.out.find("name fl_egress"), std::string::npos) << bpftool.out;
  EXPECT_EQ(bpftool.out.find("name fl_ingress"), std::string::npos) << bpftool.out;
  EXPECT_TRUE(files_under(bpffs_root()).empty()) << "pins remain under " << bpffs_root();
  const std::string lock = faultline::state_lock_path({bpffs_root()});
  EXPECT_NE(::access(lock.c_str(), F_OK), 0) << "a private root's lock file outlives its uninstall: " << lock;
  for (const auto& [ns, dev] : {std::pair{net().a(), kDevA}, std::pair{net().b(), kDevB}}) {
    EXPECT_FALSE(has_clsact(ns, dev)) << qdiscs(ns, dev);
    for (const char* dir : {"ingress", "egress"}) {
      auto f = run_command({"ip", "netns", "exec", ns, "tc", "filter", "show", "dev", dev, dir});
      EXPECT_EQ(f.out.find("fl_"), std::string::npos) << dev << " " << dir << ": " << f.out;
    }
  }
  auto status = faultctl({"status"});
  EXPECT_NE(status.out.find("nothing installed"), std::string::npos) << status.describe();
}

// faultctl uninstall of a private layout (FAULTLINE_BPFFS_ROOT: a test's, a
// bench's) beside another live state: it waits for its own programs only, and
// leaves the neighbour's fault in effect.
TEST_P(Uninstall, APrivateLayoutLeavesItsNeighbourAlone) {
  ASSERT_NO_FATAL_FAILURE(start_partition());
  const std::string other = bpffs_root() + "-neighbour";
  const auto started = std::chrono::steady_clock::now();
  auto r = run_command({FAULTCTL_PATH, "uninstall"}, {.env = {"FAULTLINE_BPFFS_ROOT=" + other}}, 20s);
  const auto took = std::chrono::steady_clock::now() - started;
  fltest::remove_test_bpffs_root(other);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("uninstalled"), std::string::npos) << r.out;
  EXPECT_LT(took, 1500ms) << "it waited for programs that are not its own";
  EXPECT_FALSE(our_programs().empty()) << "the neighbour's programs were detached";
  EXPECT_FALSE(probe_->reachable(200ms)) << "the neighbour's partition must stay in effect";
  ASSERT_TRUE(faultctl({"abort", "--all"}).status.is(0));
  EXPECT_TRUE(run_->wait(5s));
}

FLE2E_ON_BOTH_ATTACH_PATHS(Uninstall);

}  // namespace
}  // namespace fle2e
