// Whole-file reads and writes, atomic replacement, private folders.
#include "base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "base/unique_fd.h"

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

Result<std::string> read_text_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error("cannot read " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("cannot read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status write_text_file(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return errno_error("cannot open " + path);
  ssize_t n = ::write(fd.get(), text.data(), text.size());
  if (n < 0) return errno_error("cannot write '" + text + "' to " + path);
  if (static_cast<size_t>(n) != text.size()) return make_error(EIO, "short write to " + path);
  return {};
}

Result<TempFolder> TempFolder::create(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return errno_error("mkdtemp " + pattern);
  // Readable by a wrapped command that runs as another user; written by us only.
  if (::chmod(pattern.c_str(), 0755) != 0) {
    const int e = errno;
    ::rmdir(pattern.c_str());
    return make_error(e, "chmod " + pattern);
  }
  return TempFolder(pattern);
}

TempFolder::~TempFolder() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace faultline
