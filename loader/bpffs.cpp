// bpffs mounting, our pin folders, and the state lock.
#include "loader/bpffs.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <cstdlib>
#include <functional>

namespace faultline {

BpffsLayout bpffs_layout() {
  BpffsLayout l;
  if (const char* r = std::getenv("FAULTLINE_BPFFS_ROOT"); r != nullptr && *r != '\0') l.root = r;
  return l;
}

static Status mkdir_p(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return {};
  return errno_error("cannot create " + path);
}

Status ensure_bpffs(const BpffsLayout& layout) {
  struct statfs st {};
  if (::statfs("/sys/fs/bpf", &st) != 0) return errno_error("cannot stat /sys/fs/bpf");
  if (st.f_type != BPF_FS_MAGIC) {
    if (::mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") != 0)
      return errno_error("cannot mount bpffs on /sys/fs/bpf");
  }
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

Result<NetfaultStateLock> NetfaultStateLock::acquire(const BpffsLayout& layout) {
  std::string path = state_lock_path(layout);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return errno_error("cannot open lock file " + path);
  if (::flock(fd.get(), LOCK_EX) != 0) return errno_error("cannot lock " + path);
  return NetfaultStateLock(std::move(fd));
}

}  // namespace faultline
