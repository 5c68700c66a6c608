// Cgroup mounts on hybrid and unified hosts, and the few cgroupfs operations faults need.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "loader/result.h"

namespace faultline {

struct CgroupMounts {
  std::string v2;                         // cgroup2 mount point, "" when there is none
  std::map<std::string, std::string> v1;  // v1 controller (memory, freezer, ...) -> mount point
};

// Parses /proc/self/mountinfo text (exposed for tests).
[[nodiscard]] CgroupMounts parse_cgroup_mounts(const std::string& mountinfo);
// This host's mounts, read once.
[[nodiscard]] const CgroupMounts& cgroup_mounts();

// Whether a controller is enabled on the v2 hierarchy (listed in its root cgroup.controllers).
[[nodiscard]] bool v2_has_controller(const std::string& controller);

// --cgroup as the operator wrote it ("/app", "app", or a full path under the v2
// mount) to the cgroup v2 directory; refuses what is not one. flag names the flag.
[[nodiscard]] Result<std::string> resolve_cgroup_v2_dir(const std::string& given, const std::string& flag);

// The cgroup of a process relative to its hierarchy root ("/" or "/a/b"): the v2
// one when controller is empty, else the v1 hierarchy holding that controller.
[[nodiscard]] Result<std::string> cgroup_of(int pid, const std::string& controller = "");

// PIDs in a cgroup directory, and with recursive in every cgroup below it too.
[[nodiscard]] std::vector<int> cgroup_procs(const std::string& dir, bool recursive);

// Whether the directory has child cgroups.
[[nodiscard]] bool cgroup_has_children(const std::string& dir);

// Kills every process in a cgroup (and below), waits for it to empty, removes it.
// A cgroup already gone is success.
[[nodiscard]] Status remove_cgroup(const std::string& dir);

}  // namespace faultline
