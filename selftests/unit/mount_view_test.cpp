// What faultctl reads from a mount namespace's view: whether a mount on a
// folder would propagate to other namespaces, and cgroup names below the
// hierarchy root (what records hold for faultctl in other views).
#include <gtest/gtest.h>

#include "base/cgroup.h"
#include "loader/bpffs.h"

namespace faultline {
namespace {

// /proc/self/mountinfo under `ip netns exec`: / a slave, /sys a fresh sysfs.
const char* kIpNetnsExec =
    "49 48 254:0 / / rw,relatime master:1 - ext4 /dev/vda rw\n"
    "51 49 0:20 / /proc rw,relatime - proc proc rw\n"
    "52 49 0:40 / /sys rw,relatime - sysfs blue rw\n";

// A host's, where systemd makes every mount shared.
const char* kSharedHost =
    "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "23 22 0:21 / /sys rw,nosuid shared:2 - sysfs sysfs rw\n"
    "30 23 0:27 / /sys/fs/cgroup rw shared:3 - tmpfs tmpfs rw\n";

TEST(MountView, ANewMountUnderIpNetnsExecStaysThere) {
  EXPECT_FALSE(mount_on_propagates(kIpNetnsExec, "/sys/fs/bpf")) << "the fresh /sys holds it, and it is private";
  EXPECT_FALSE(mount_on_propagates(kIpNetnsExec, "/tmp/x")) << "a slave / receives, it does not send";
}

TEST(MountView, ASharedMountPropagates) {
  EXPECT_TRUE(mount_on_propagates(kSharedHost, "/sys/fs/bpf"));
  EXPECT_TRUE(mount_on_propagates(kSharedHost, "/sys")) << "a mount on a mount point stacks on it";
}

TEST(MountView, TheLastLongestMountHoldingTheFolderDecides) {
  std::string mi = std::string(kSharedHost) + "60 23 0:50 / /sys/fs rw,relatime - tmpfs private rw\n";
  EXPECT_FALSE(mount_on_propagates(mi, "/sys/fs/bpf")) << "the private /sys/fs is the one below";
  mi += "61 60 0:51 / /sys/fs rw,relatime shared:9 - tmpfs over rw\n";
  EXPECT_TRUE(mount_on_propagates(mi, "/sys/fs/bpf")) << "the mount on top of /sys/fs is shared";
  const std::string shared_sys = "1 0 8:1 / / rw - ext4 sda rw\n2 1 0:2 / /sys rw shared:4 - sysfs sysfs rw\n";
  EXPECT_FALSE(mount_on_propagates(shared_sys, "/sysfoo")) << "/sys does not hold /sysfoo; the private / does";
  EXPECT_TRUE(mount_on_propagates(shared_sys, "/sys/fs/bpf"));
}

TEST(MountView, NoMountinfoPropagatesNothing) { EXPECT_FALSE(mount_on_propagates("", "/sys/fs/bpf")); }

TEST(MountView, CgroupNamesAreBelowTheHierarchyRoot) {
  const std::string& v2 = cgroup_mounts().v2;
  if (v2.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy: " << cgroup_mounts().v2_found;
  EXPECT_EQ(cgroup_v2_name(v2 + "/a/b"), "/a/b");
  EXPECT_EQ(cgroup_v2_name(v2), "/");
  EXPECT_EQ(cgroup_v2_name(v2 + "x/a"), v2 + "x/a") << "a sibling of the root is not below it";
  EXPECT_EQ(cgroup_v2_name("/elsewhere/a"), "/elsewhere/a");
}

}  // namespace
}  // namespace faultline
