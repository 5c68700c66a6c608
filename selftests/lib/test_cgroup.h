// A cgroup v2 directory of a test's own, and the clean-up of one a test (or a
// faultctl it ran) left behind.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace fltest {

// Where cgroup v2 is mounted ("" if it is not).
[[nodiscard]] const std::string& cgroup2_mount();

// Thaws the cgroup, kills its members and removes it, retrying for up to 2 s
// (a killed process leaves its cgroup a little later). False if it is still there.
bool remove_cgroup(const std::string& path);

class TestCgroup {
 public:
  // name is relative to the cgroup2 mount, e.g. "fl-x" or "fl-x/inner". Throws
  // std::runtime_error if there is no cgroup2 mount or the directory cannot be made
  // (it must not exist yet: a cgroup is a test's own or none).
  explicit TestCgroup(const std::string& name);
  // Removes it as remove_cgroup does; a cgroup that stays is a test failure.
  ~TestCgroup();
  TestCgroup(const TestCgroup&) = delete;
  TestCgroup& operator=(const TestCgroup&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }  // absolute
  [[nodiscard]] std::string relative() const;                      // below the mount, from "/"
  [[nodiscard]] std::vector<pid_t> procs() const;
  // Moves a process in. Throws std::runtime_error if the kernel refuses.
  void add(pid_t pid) const;
  [[nodiscard]] bool frozen() const;

 private:
  std::string path_;
};

}  // namespace fltest
