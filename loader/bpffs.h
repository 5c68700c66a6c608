// Where Faultline's kernel state lives: pins under /sys/fs/bpf/faultline, and the lock.
#pragma once

#include <functional>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

struct BpffsLayout {
  std::string root = "/sys/fs/bpf/faultline";

  [[nodiscard]] std::string maps() const { return root + "/maps"; }
  [[nodiscard]] std::string links() const { return root + "/links"; }
  [[nodiscard]] std::string map(const std::string& name) const { return maps() + "/" + name; }
};

// The layout in use: FAULTLINE_BPFFS_ROOT overrides the root (tests run beside a live install).
[[nodiscard]] BpffsLayout bpffs_layout();

// Makes sure pins can go to `root` (a folder on bpffs, made or not): nothing to
// do when the bpffs holding it is mounted; for a root under /sys/fs/bpf with no
// bpffs there (`ip netns exec` remounts /sys without it; a container may not
// mount it) it mounts one on /sys/fs/bpf, unless that mount would propagate to
// other mount namespaces. Such a bpffs is this mount namespace's own: its pins
// live as long as the namespace (any process in it), and faultctl in other
// namespaces, the host's included, does not see them.
[[nodiscard]] Status ensure_pin_root(const std::string& root);

// Whether a mount on `dir` would propagate to other mount namespaces: the mount
// holding dir in this /proc/self/mountinfo text (the last, longest mount point
// above it) is in a shared peer group. Exposed for tests.
[[nodiscard]] bool mount_on_propagates(const std::string& mountinfo, const std::string& dir);

// Mounts bpffs on /sys/fs/bpf if nothing is mounted there, then creates our folders.
[[nodiscard]] Status ensure_bpffs(const BpffsLayout& layout);

// Removes the folders of the layout (they must be empty of pins by then).
void remove_bpffs_dirs(const BpffsLayout& layout);

// The lock files of a layout, outside bpffs so that removing the pin folders
// never races them: one serialises changes to the packet-fault state, the other
// policy applies. Whoever makes a throw-away layout (a test, a bench) removes
// both afterwards with remove_layout_locks().
[[nodiscard]] inline std::string state_lock_path(const BpffsLayout& layout) {
  return "/run/faultline" + std::to_string(std::hash<std::string>{}(layout.root) % 100000) + ".lock";
}
[[nodiscard]] inline std::string policy_lock_path(const BpffsLayout& layout) {
  return "/run/faultline" + std::to_string(std::hash<std::string>{}(layout.root) % 100000) + ".policy.lock";
}
// Unlinks both. Only for a layout nobody uses any more: a process waiting on
// the old file would otherwise hold a lock nobody else can see.
void remove_layout_locks(const BpffsLayout& layout);

// An exclusive advisory lock serialising every change to the pinned netfault
// state (packet faults; resource faults lock their own store).
class NetfaultStateLock {
 public:
  [[nodiscard]] static Result<NetfaultStateLock> acquire(const BpffsLayout& layout);

 private:
  explicit NetfaultStateLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace faultline
