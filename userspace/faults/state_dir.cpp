// Private folders, atomic files and ID counters for /run/faultline.
#include "userspace/faults/state_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "loader/fd.h"

namespace faultline {

Status ensure_private_dir(const std::string& path, bool create) {
  if (create && ::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return errno_error("cannot create " + path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno_error("cannot open state folder " + path);
  if (!S_ISDIR(st.st_mode)) return make_error(ENOTDIR, "state folder " + path + " is not a directory");
  if (st.st_uid != ::geteuid())
    return make_error(EPERM, "refusing state folder " + path + ": owned by uid " + std::to_string(st.st_uid) +
                                 ", not by us (uid " + std::to_string(::geteuid()) + ")");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return make_error(EPERM, "refusing state folder " + path + ": others can write to it (chmod 700 it)");
  return {};
}

Status write_all(int fd, const std::string& text, const std::string& what) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("cannot write " + what);
    }
    off += static_cast<size_t>(n);
  }
  return {};
}

Status write_file_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) return errno_error("cannot write " + tmp);
  if (auto st = write_all(fd.get(), text, tmp); !st) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (::fsync(fd.get()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = errno_error("cannot replace " + path);
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

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
