// cgroup v2 helpers over the mount the feature probe found.
#include "userspace/policy/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "loader/features.h"

namespace faultline {

Result<UniqueFd> open_cgroup(const std::string& path, std::string* resolved) {
  const auto& f = features();
  if (!f.cgroup_v2.available) return make_error(ENOTSUP, "no cgroup v2: " + f.cgroup_v2.detail);
  std::string full = path;
  if (path.rfind(f.cgroup_v2_mount, 0) != 0) full = f.cgroup_v2_mount + (path.front() == '/' ? "" : "/") + path;
  UniqueFd fd(::open(full.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return errno_error("--cgroup " + path + ": cannot open " + full);
  if (resolved != nullptr) *resolved = full;
  return fd;
}

Result<std::string> cgroup_of_pid(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  if (!in) return make_error(ESRCH, "--pid " + std::to_string(pid) + ": no such process");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return make_error(ENOENT, "--pid " + std::to_string(pid) + ": the process has no cgroup v2 membership");
}

Result<ScopedCgroup> ScopedCgroup::create(const std::string& name) {
  const auto& f = features();
  if (!f.cgroup_v2.available) return make_error(ENOTSUP, "no cgroup v2: " + f.cgroup_v2.detail);
  std::string path = f.cgroup_v2_mount + "/" + name;
  if (::mkdir(path.c_str(), 0755) != 0) return errno_error("cannot create cgroup " + path);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    ::rmdir(path.c_str());
    return errno_error("cannot open cgroup " + path);
  }
  return ScopedCgroup(path, std::move(fd));
}

ScopedCgroup::ScopedCgroup(ScopedCgroup&& o) noexcept : path_(std::move(o.path_)), fd_(std::move(o.fd_)) {
  o.path_.clear();
}

Status ScopedCgroup::join(pid_t pid) const {
  std::ofstream procs(path_ + "/cgroup.procs");
  procs << pid;
  procs.flush();
  if (!procs) return errno_error("cannot move pid " + std::to_string(pid) + " into " + path_);
  return {};
}

ScopedCgroup::~ScopedCgroup() {
  if (path_.empty()) return;
  // cgroup.kill where the kernel has it (5.14+), else SIGKILL each member.
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (::rmdir(path_.c_str()) == 0 || errno == ENOENT) return;
    {
      std::ofstream kill(path_ + "/cgroup.kill");
      kill << 1;
    }
    std::ifstream procs(path_ + "/cgroup.procs");
    for (pid_t p; procs >> p;) ::kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace faultline
