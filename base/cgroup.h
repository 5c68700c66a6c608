// The one cgroup module: mounts on hybrid and unified hosts, resolving what an
// operator names, the cgroup of a process, throw-away cgroups, and teardown.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

struct CgroupMounts {
  std::string v2;  // cgroup2 mount point, "" when there is none
  // "" when v2 is a mount of this mount namespace; else what was done instead
  // (or why there is none), for `faultctl features` and errors.
  std::string v2_found;
  bool v2_private = false;                // v2 is a mount only this process holds (/proc/PID/fd/N)
  std::map<std::string, std::string> v1;  // v1 controller (memory, freezer, ...) -> mount point
};

// Parses /proc/self/mountinfo text (exposed for tests).
[[nodiscard]] CgroupMounts parse_cgroup_mounts(const std::string& mountinfo);
// The mounts this process can use, found once in /proc/self/mountinfo. When
// that has no cgroup2 (`ip netns exec` remounts /sys; a container may not mount
// it), v2 is a cgroup2 mount of our own that is attached nowhere
// (fsopen/fsmount), reached as /proc/PID/fd/N: no mount table changes, and it
// goes with this process. It is the root of our cgroup namespace's hierarchy,
// as a mount would be, so cgroup ids, paths from /proc/PID/cgroup and BPF
// attachment agree with every other view of it.
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

// A cgroup v2 directory, opened: its fd (for cgroup program attachment), its
// full path and its id (the directory's inode number, which bpf_skb_cgroup_id()
// and bpf_get_current_cgroup_id() report).
struct OpenCgroup {
  std::string path;
  UniqueFd fd;
  uint64_t id = 0;
};
// resolve_cgroup_v2_dir(given, flag), then opened.
[[nodiscard]] Result<OpenCgroup> open_cgroup_v2(const std::string& given, const std::string& flag);

// A cgroup v2 directory as a path below the hierarchy root ("/a/b"), the name
// every mount namespace shares (what records kept for other processes hold
// when v2 is private); a path outside v2 comes back unchanged.
[[nodiscard]] std::string cgroup_v2_name(const std::string& full_path);

// Depth of a cgroup v2 directory below the hierarchy root (the root is 0), as
// bpf_get_current_ancestor_cgroup_id() counts it.
[[nodiscard]] uint32_t cgroup_level(const std::string& full_path);

// A throw-away cgroup v2 for a command: created, joined, emptied and removed.
class ScopedCgroup {
 public:
  // Creates <cgroup2 mount>/<name>.
  [[nodiscard]] static Result<ScopedCgroup> create(const std::string& name);
  ScopedCgroup(ScopedCgroup&& o) noexcept;
  ScopedCgroup& operator=(ScopedCgroup&&) = delete;
  ScopedCgroup(const ScopedCgroup&) = delete;
  ~ScopedCgroup();  // remove_cgroup(): kills what is left inside, then removes it

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] uint64_t id() const { return id_; }
  // Moves a process (0: the caller) into the cgroup.
  [[nodiscard]] Status join(pid_t pid) const;

 private:
  ScopedCgroup(std::string path, UniqueFd fd, uint64_t id) : path_(std::move(path)), fd_(std::move(fd)), id_(id) {}
  std::string path_;
  UniqueFd fd_;
  uint64_t id_ = 0;
};

}  // namespace faultline
