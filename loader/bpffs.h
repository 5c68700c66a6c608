// Where Faultline's kernel state lives: pins under /sys/fs/bpf/faultline, and the lock.
#pragma once

#include <functional>
#include <string>

#include "base/unique_fd.h"
#include "base/result.h"

namespace faultline {

struct BpffsLayout {
  std::string root = "/sys/fs/bpf/faultline";

  [[nodiscard]] std::string maps() const { return root + "/maps"; }
  [[nodiscard]] std::string links() const { return root + "/links"; }
  [[nodiscard]] std::string map(const std::string& name) const { return maps() + "/" + name; }
};

// The layout in use: FAULTLINE_BPFFS_ROOT overrides the root (tests run beside a live install).
[[nodiscard]] BpffsLayout bpffs_layout();

// Mounts bpffs on /sys/fs/bpf if nothing is mounted there, then creates our folders.
[[nodiscard]] Status ensure_bpffs(const BpffsLayout& layout);

// Removes the folders of the layout (they must be empty of pins by then).
void remove_bpffs_dirs(const BpffsLayout& layout);

// The lock file of a layout (outside bpffs, so that removing the pin folders
// never races it). Whoever makes a throw-away layout removes it afterwards.
[[nodiscard]] inline std::string state_lock_path(const BpffsLayout& layout) {
  return "/run/faultline" + std::to_string(std::hash<std::string>{}(layout.root) % 100000) + ".lock";
}

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
