// Cgroup discovery and teardown; v1 and v2 side by side, since hybrid hosts have both.
#include "base/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "base/clock.h"
#include "base/files.h"

namespace faultline {
namespace {

std::vector<std::string> child_dirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    out.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  return out;
}

// Mountinfo escapes spaces and friends as three octal digits (\040).
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    bool octal = s[i] == '\\' && i + 3 < s.size();
    for (size_t k = 1; octal && k <= 3; ++k) octal = s[i + k] >= '0' && s[i + k] <= '7';
    if (octal) {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

CgroupMounts parse_cgroup_mounts(const std::string& mountinfo) {
  CgroupMounts m;
  std::istringstream in(mountinfo);
  for (std::string line; std::getline(in, line);) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string w; ls >> w;) f.push_back(w);
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || dash + 3 > f.end()) continue;
    const std::string& fstype = *(dash + 1);
    const std::string mnt = unescape(f[4]);
    if (fstype == "cgroup2") {
      if (m.v2.empty()) m.v2 = mnt;
    } else if (fstype == "cgroup") {
      std::istringstream opts(*(dash + 3));
      for (std::string o; std::getline(opts, o, ',');) {
        if (o == "rw" || o == "ro" || o.find('=') != std::string::npos) continue;
        if (!m.v1.contains(o)) m.v1[o] = mnt;
      }
    }
  }
  return m;
}

namespace {

bool is_cgroup2(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

// A cgroup2 mount that is attached to no mount table (the new mount API), so
// no namespace's mounts change; its fd stays open for the life of the process.
Result<std::string> private_v2_mount() {
#if defined(SYS_fsopen) && defined(SYS_fsconfig) && defined(SYS_fsmount)
  UniqueFd fs(static_cast<int>(::syscall(SYS_fsopen, "cgroup2", FSOPEN_CLOEXEC)));
  if (!fs) return errno_error("fsopen(cgroup2)");
  if (::syscall(SYS_fsconfig, fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    return errno_error("fsconfig(cgroup2, create)");
  int mnt = static_cast<int>(::syscall(SYS_fsmount, fs.get(), FSMOUNT_CLOEXEC, 0));
  if (mnt < 0) return errno_error("fsmount(cgroup2)");
  // /proc/PID/fd/N, not /proc/self: a record naming it must not mean another
  // process's fd N once we are gone.
  std::string dir = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(mnt);
  if (!is_cgroup2(dir)) dir = "/proc/self/fd/" + std::to_string(mnt);
  if (!is_cgroup2(dir)) {
    ::close(mnt);
    return make_error(ENOENT, "the private cgroup2 mount is not reachable through /proc");
  }
  return dir;  // the fd is deliberately never closed
#else
  return make_error(ENOSYS, "built without the new mount API (fsopen)");
#endif
}

}  // namespace

const CgroupMounts& cgroup_mounts() {
  static const CgroupMounts m = [] {
    auto t = read_text_file("/proc/self/mountinfo");
    CgroupMounts c = t ? parse_cgroup_mounts(*t) : CgroupMounts{};
    if (!c.v2.empty()) return c;
    if (auto own = private_v2_mount()) {
      c.v2 = *own;
      c.v2_private = true;
      c.v2_found = "no cgroup2 mount in this mount namespace; a private one this process holds";
    } else {
      c.v2_found = "no cgroup2 mount in this mount namespace, and a private one failed: " + own.error().describe();
    }
    return c;
  }();
  return m;
}

bool v2_has_controller(const std::string& controller) {
  const auto& m = cgroup_mounts();
  if (m.v2.empty()) return false;
  auto t = read_text_file(m.v2 + "/cgroup.controllers");
  if (!t) return false;
  std::istringstream in(*t);
  for (std::string c; in >> c;) {
    if (c == controller) return true;
  }
  return false;
}

Result<std::string> resolve_cgroup_v2_dir(const std::string& given, const std::string& flag) {
  const auto& m = cgroup_mounts();
  if (given.empty()) return make_error(EINVAL, flag + ": empty path");
  if (m.v2.empty()) return make_error(ENOTSUP, flag + " " + given + ": no cgroup v2 hierarchy: " + m.v2_found);
  std::string full = given;
  if (given.rfind(m.v2 + "/", 0) != 0 && given != m.v2) full = m.v2 + (given.front() == '/' ? "" : "/") + given;
  while (full.size() > 1 && full.back() == '/') full.pop_back();
  if (full.find("/../") != std::string::npos || full.ends_with("/.."))
    return make_error(EINVAL, flag + " " + given + ": '..' is not allowed in a cgroup path");
  struct stat st {};
  if (::stat(full.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error(ENOENT, flag + " " + given + ": no cgroup v2 directory at " + full);
  struct statfs fs {};
  if (::statfs(full.c_str(), &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC)
    return make_error(EINVAL, flag + " " + given + ": " + full + " is not on a cgroup v2 file system");
  return full;
}

Result<std::string> cgroup_of(int pid, const std::string& controller) {
  auto t = read_text_file("/proc/" + std::to_string(pid) + "/cgroup");
  if (!t) return make_error(ESRCH, "no process " + std::to_string(pid));
  std::istringstream in(*t);
  for (std::string line; std::getline(in, line);) {
    // hierarchy-id:controller-list:path
    auto c1 = line.find(':');
    auto c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    std::string id = line.substr(0, c1), ctrls = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    if (controller.empty()) {
      if (id == "0" && ctrls.empty()) return path;
      continue;
    }
    std::istringstream cs(ctrls);
    for (std::string c; std::getline(cs, c, ',');) {
      if (c == controller) return path;
    }
  }
  return make_error(ENOENT, "process " + std::to_string(pid) + " is in no " +
                                (controller.empty() ? std::string("cgroup v2") : controller + " cgroup"));
}

std::vector<int> cgroup_procs(const std::string& dir, bool recursive) {
  std::vector<int> out;
  if (auto t = read_text_file(dir + "/cgroup.procs")) {
    std::istringstream in(*t);
    for (int pid; in >> pid;) out.push_back(pid);
  }
  if (recursive) {
    for (const auto& c : child_dirs(dir)) {
      auto sub = cgroup_procs(c, true);
      out.insert(out.end(), sub.begin(), sub.end());
    }
  }
  return out;
}

bool cgroup_has_children(const std::string& dir) { return !child_dirs(dir).empty(); }

Status remove_cgroup(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return {};  // gone already
  for (const auto& c : child_dirs(dir)) FL_TRY(remove_cgroup(c));
  // cgroup.kill (v2, 5.14+) kills atomically, even a process forking at this moment;
  // elsewhere SIGKILL each member until the cgroup is empty.
  bool killed = write_text_file(dir + "/cgroup.kill", "1").ok();
  for (int i = 0; i < 300; ++i) {
    auto pids = cgroup_procs(dir, false);
    if (pids.empty()) break;
    if (!killed || i % 20 == 19) {
      for (int pid : pids) ::kill(pid, SIGKILL);
    }
    sleep_ms(10);
  }
  for (int i = 0; i < 300; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return {};
    if (errno != EBUSY) break;
    sleep_ms(10);  // a killed member leaves the cgroup a moment after it dies
  }
  return errno_error("cannot remove cgroup " + dir);
}

Result<OpenCgroup> open_cgroup_v2(const std::string& given, const std::string& flag) {
  auto dir = resolve_cgroup_v2_dir(given, flag);
  if (!dir) return dir.error();
  OpenCgroup c;
  c.path = *dir;
  c.fd.reset(::open(c.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!c.fd) return errno_error(flag + " " + given + ": cannot open " + c.path);
  struct stat st {};
  if (::fstat(c.fd.get(), &st) != 0) return errno_error(flag + " " + given + ": cannot stat " + c.path);
  c.id = st.st_ino;
  return c;
}

std::string cgroup_v2_name(const std::string& full_path) {
  const std::string& root = cgroup_mounts().v2;
  if (root.empty() || full_path == root) return root.empty() ? full_path : "/";
  if (full_path.rfind(root + "/", 0) != 0) return full_path;
  return full_path.substr(root.size());
}

uint32_t cgroup_level(const std::string& full_path) {
  const std::string& root = cgroup_mounts().v2;
  std::string rel = full_path.rfind(root, 0) == 0 ? full_path.substr(root.size()) : full_path;
  uint32_t level = 0;
  bool in_name = false;
  for (char ch : rel) {
    if (ch == '/') {
      in_name = false;
    } else if (!in_name) {
      in_name = true;
      ++level;
    }
  }
  return level;
}

Result<ScopedCgroup> ScopedCgroup::create(const std::string& name) {
  const std::string& root = cgroup_mounts().v2;
  if (root.empty()) return make_error(ENOTSUP, "no cgroup v2 hierarchy: " + cgroup_mounts().v2_found);
  std::string path = root + "/" + name;
  if (::mkdir(path.c_str(), 0755) != 0) return errno_error("cannot create cgroup " + path);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) {
    Error e = errno_error("cannot open cgroup " + path);
    ::rmdir(path.c_str());
    return e;
  }
  return ScopedCgroup(path, std::move(fd), st.st_ino);
}

ScopedCgroup::ScopedCgroup(ScopedCgroup&& o) noexcept : path_(std::move(o.path_)), fd_(std::move(o.fd_)), id_(o.id_) {
  o.path_.clear();
}

Status ScopedCgroup::join(pid_t pid) const {
  if (auto st = write_text_file(path_ + "/cgroup.procs", std::to_string(pid)); !st)
    return make_error(st.error().err, "cannot move pid " + std::to_string(pid) + " into " + path_);
  return {};
}

ScopedCgroup::~ScopedCgroup() {
  if (!path_.empty()) (void)remove_cgroup(path_);
}

}  // namespace faultline
