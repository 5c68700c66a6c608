// Private folders, atomic files and ID counters for /run/faultline.
#include "userspace/state/state_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/unique_fd.h"

namespace faultline {

Result<std::string> next_id(const std::string& counter_path, const std::string& prefix) {
  UniqueFd fd(::open(counter_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return errno_error("cannot open " + counter_path);
  if (::flock(fd.get(), LOCK_EX) != 0) return errno_error("cannot lock " + counter_path);
  char buf[32] = {};
  ssize_t n = ::pread(fd.get(), buf, sizeof(buf) - 1, 0);
  uint64_t next = n > 0 ? std::strtoull(buf, nullptr, 10) : 0;
  if (next == 0) next = 1;
  std::string out = std::to_string(next + 1) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 ||
      ::pwrite(fd.get(), out.data(), out.size(), 0) != static_cast<ssize_t>(out.size()))
    return errno_error("cannot update " + counter_path);
  return prefix + std::to_string(next);
}

}  // namespace faultline
