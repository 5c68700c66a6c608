// TestCgroup: mkdir below the cgroup2 mount; at the end thaw, kill, rmdir.
#include "selftests/lib/test_cgroup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fltest {

const std::string& cgroup2_mount() {
  static const std::string mount = [] {
    std::ifstream in("/proc/self/mounts");
    std::string dev, dir, type, rest;
    while (in >> dev >> dir >> type && std::getline(in, rest)) {
      if (type == "cgroup2") return dir;
    }
    return std::string();
  }();
  return mount;
}

bool remove_cgroup(const std::string& path) {
  // A frozen member cannot die: thaw first (the file is absent before 5.2; then nothing is frozen).
  std::ofstream(path + "/cgroup.freeze") << "0";
  for (int i = 0; i < 100; ++i) {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    std::ifstream procs(path + "/cgroup.procs");
    for (pid_t p; procs >> p;) ::kill(p, SIGKILL);
    ::usleep(20'000);
  }
  return false;
}

TestCgroup::TestCgroup(const std::string& name) {
  if (cgroup2_mount().empty()) throw std::runtime_error("no cgroup v2 mount");
  path_ = cgroup2_mount() + "/" + name;
  if (::mkdir(path_.c_str(), 0755) != 0) throw std::runtime_error("mkdir " + path_ + ": " + std::strerror(errno));
}

TestCgroup::~TestCgroup() {
  if (!remove_cgroup(path_)) ADD_FAILURE() << "could not remove test cgroup " << path_;
}

std::string TestCgroup::relative() const { return path_.substr(cgroup2_mount().size()); }

std::vector<pid_t> TestCgroup::procs() const {
  std::ifstream in(path_ + "/cgroup.procs");
  std::vector<pid_t> v;
  for (pid_t p; in >> p;) v.push_back(p);
  return v;
}

void TestCgroup::add(pid_t pid) const {
  std::ofstream f(path_ + "/cgroup.procs");
  f << pid;
  f.flush();
  if (!f) throw std::runtime_error("cannot move " + std::to_string(pid) + " into " + path_);
}

bool TestCgroup::frozen() const {
  std::ifstream in(path_ + "/cgroup.events");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str().find("frozen 1") != std::string::npos;
}

}  // namespace fltest
