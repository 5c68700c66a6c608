// bpffs mounting, our pin folders, and the state lock.
#include "loader/bpffs.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

namespace faultline {

BpffsLayout bpffs_layout() {
  BpffsLayout l;
  if (const char* r = std::getenv("FAULTLINE_BPFFS_ROOT"); r != nullptr && *r != '\0') l.root = r;
  return l;
}

namespace {

// Whether the deepest existing folder on the way to path is on bpffs.
bool lands_on_bpffs(std::string path) {
  while (!path.empty()) {
    struct statfs st {};
    if (::statfs(path.c_str(), &st) == 0) return st.f_type == BPF_FS_MAGIC;
    if (errno != ENOENT) return false;
    auto slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0) return false;
    path.resize(slash);
  }
  return false;
}

}  // namespace

bool mount_on_propagates(const std::string& mountinfo, const std::string& dir) {
  std::istringstream in(mountinfo);
  size_t best = 0;
  bool shared = false;
  for (std::string line; std::getline(in, line);) {
    // id parent major:minor root mount-point options [optional...] - ...
    std::istringstream ls(line);
    std::string id, parent, dev, root, mnt, opts, field;
    if (!(ls >> id >> parent >> dev >> root >> mnt >> opts)) continue;
    bool holds = mnt == "/" || dir == mnt || dir.rfind(mnt + "/", 0) == 0;
    if (!holds || mnt.size() < best) continue;  // the last, longest mount holding dir is on top
    best = mnt.size();
    shared = false;
    while (ls >> field && field != "-") shared = shared || field.rfind("shared:", 0) == 0;
  }
  return shared;
}

static Status mount_bpffs_if_missing() {
  struct statfs st {};
  if (::statfs("/sys/fs/bpf", &st) != 0) return errno_error("cannot stat /sys/fs/bpf");
  if (st.f_type != BPF_FS_MAGIC && ::mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") != 0)
    return errno_error("cannot mount bpffs on /sys/fs/bpf");
  return {};
}

Status ensure_pin_root(const std::string& root) {
  if (lands_on_bpffs(root)) return {};
  if (root.rfind("/sys/fs/bpf/", 0) != 0) return make_error(ENOTSUP, root + " is not on bpffs");
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream mountinfo;
  mountinfo << in.rdbuf();
  if (!in || mount_on_propagates(mountinfo.str(), "/sys/fs/bpf"))
    return make_error(ENOTSUP, "no bpffs on /sys/fs/bpf, and a mount there would reach other mount namespaces");
  return mount_bpffs_if_missing();
}

static Status mkdir_p(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return {};
  return errno_error("cannot create " + path);
}

Status ensure_bpffs(const BpffsLayout& layout) {
  FL_TRY(mount_bpffs_if_missing());
  FL_TRY(mkdir_p(layout.root));
  FL_TRY(mkdir_p(layout.maps()));
  FL_TRY(mkdir_p(layout.links()));
  return {};
}

void remove_bpffs_dirs(const BpffsLayout& layout) {
  ::rmdir(layout.maps().c_str());
  ::rmdir(layout.links().c_str());
  ::rmdir(layout.root.c_str());
}

void remove_layout_locks(const BpffsLayout& layout) {
  ::unlink(state_lock_path(layout).c_str());
  ::unlink(policy_lock_path(layout).c_str());
}

Result<NetfaultStateLock> NetfaultStateLock::acquire(const BpffsLayout& layout) {
  std::string path = state_lock_path(layout);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return errno_error("cannot open lock file " + path);
  if (::flock(fd.get(), LOCK_EX) != 0) return errno_error("cannot lock " + path);
  return NetfaultStateLock(std::move(fd));
}

}  // namespace faultline
