// --max-memory, --max-pids, --max-cpu of `faultctl guard`: limits on the
// command's cgroup. Each controller where the host has it: cgroup v2 (the
// guard's own cgroup: memory.max, pids.max, cpu.max), else its v1 hierarchy
// (hybrid hosts: a cgroup made for the command under faultctl's own, which
// the command joins too: memory.limit_in_bytes, pids.max, cpu.cfs_quota_us).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

struct ResourceLimits {
  uint64_t memory_bytes = 0;  // 0: no limit
  uint32_t pids = 0;
  uint32_t cpu_percent = 0;  // of one CPU: 150 is one and a half
  [[nodiscard]] bool any() const { return memory_bytes != 0 || pids != 0 || cpu_percent != 0; }
};

class CgroupLimits {
 public:
  // Writes each limit asked for. v2_dir is the command's cgroup v2 (made by
  // the caller); name names the v1 cgroups made here.
  [[nodiscard]] static Result<CgroupLimits> apply(const ResourceLimits& limits, const std::string& v2_dir,
                                                  const std::string& name);
  CgroupLimits(CgroupLimits&& o) noexcept : files_(std::move(o.files_)), v1_dirs_(std::move(o.v1_dirs_)) {
    o.v1_dirs_.clear();
  }
  CgroupLimits& operator=(CgroupLimits&&) = delete;
  CgroupLimits(const CgroupLimits&) = delete;
  ~CgroupLimits();  // the v1 cgroups emptied (what is left is killed) and removed

  // Moves a process into the v1 cgroups (the v2 one is the caller's to join).
  [[nodiscard]] Status join(pid_t pid) const;
  // "memory 2GB (/sys/fs/cgroup/.../memory.max), pids 512 (...), cpu 150% (...)".
  [[nodiscard]] std::string describe() const;
  // What the limits did so far: "pids: 37 forks refused; memory: 1 OOM kill"; "" for nothing.
  [[nodiscard]] std::string hits() const;

 private:
  CgroupLimits() = default;
  struct File {
    std::string controller;  // memory, pids, cpu
    std::string dir;         // the cgroup the limit is in
    std::string file;        // the file written
    std::string value;       // as said to people
    bool v2 = false;
  };
  std::vector<File> files_;
  std::vector<std::string> v1_dirs_;
};

}  // namespace faultline
