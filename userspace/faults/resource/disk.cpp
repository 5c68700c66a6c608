// DiskFill: one balloon file that takes a file system to a fill level, above a free-space floor.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "userspace/faults/resource/fault.h"

namespace faultline {
namespace {

std::string pct(double v) {
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << v << "%";
  return o.str();
}

// Where fallocate is unsupported the space has to be written. The pattern is not
// zeros so that a file system that skips zero blocks still allocates them.
Status write_out(int fd, uint64_t bytes, const std::string& path) {
  std::vector<char> chunk(1 << 20, static_cast<char>(0xfa));
  uint64_t off = 0;
  while (off < bytes) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), bytes - off));
    ssize_t w = ::pwrite(fd, chunk.data(), n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno_error("cannot write the balloon " + path + " at " + format_bytes(off));
    }
    off += static_cast<uint64_t>(w);
  }
  return {};
}

}  // namespace

double FsUsage::use_percent() const {
  uint64_t denom = used + available;
  return denom == 0 ? 100.0 : 100.0 * static_cast<double>(used) / static_cast<double>(denom);
}

Result<FsUsage> fs_usage(const std::string& path) {
  struct statvfs v {};
  if (::statvfs(path.c_str(), &v) != 0) return errno_error("cannot statvfs " + path);
  FsUsage u;
  u.block = v.f_frsize ? v.f_frsize : v.f_bsize;
  u.used = (v.f_blocks - v.f_bfree) * u.block;
  u.available = v.f_bavail * u.block;
  if (v.f_blocks == 0) return make_error(EINVAL, path + " is on a file system with no capacity (proc, sysfs, ...)");
  return u;
}

Result<uint64_t> balloon_bytes(const ResourceSpec& spec, const FsUsage& fs) {
  uint64_t want = 0;
  std::string flag;
  if (spec.fill_percent) {
    std::ostringstream f;
    f << "--fill " << *spec.fill_percent << "%";
    flag = f.str();
    double target_used = *spec.fill_percent / 100.0 * static_cast<double>(fs.used + fs.available);
    if (target_used <= static_cast<double>(fs.used))
      return make_error(EINVAL, flag + ": " + spec.path + " is already " + pct(fs.use_percent()) + " full");
    want = static_cast<uint64_t>(std::ceil(target_used - static_cast<double>(fs.used)));
  } else {
    flag = "--size " + format_bytes(spec.size_bytes);
    want = spec.size_bytes;
  }
  if (fs.block > 0) want = (want + fs.block - 1) / fs.block * fs.block;
  if (want >= fs.available)
    return make_error(ENOSPC, flag + ": only " + format_bytes(fs.available) + " is free on " + spec.path);
  if (fs.available - want < spec.min_free_bytes)
    return make_error(ERANGE, flag + ": would leave " + format_bytes(fs.available - want) + " free on " + spec.path +
                                  ", under the floor of " + format_bytes(spec.min_free_bytes) + " (--min-free)");
  return want;
}

Result<std::unique_ptr<DiskFill>> DiskFill::plan(const ResourceSpec& spec) {
  std::unique_ptr<DiskFill> f(new DiskFill(spec));
  struct stat st {};
  if (::stat(spec.path.c_str(), &st) != 0) return make_error(ENOENT, "--path " + spec.path + ": no such directory");
  if (!S_ISDIR(st.st_mode)) return make_error(ENOTDIR, "--path " + spec.path + ": not a directory");
  if (::access(spec.path.c_str(), W_OK) != 0) return make_error(EACCES, "--path " + spec.path + ": not writable");
  auto fs = fs_usage(spec.path);
  if (!fs) return make_error(EINVAL, "--path " + fs.error().message);
  auto b = balloon_bytes(spec, *fs);
  if (!b) return b.error();
  f->balloon_bytes_ = *b;
  f->use_before_ = fs->use_percent();
  FsUsage after = *fs;
  after.used += *b;
  after.available -= *b;
  f->use_after_ = after.use_percent();
  f->free_after_ = after.available;
  return f;
}

nlohmann::json DiskFill::plan() const {
  nlohmann::json j{{"path", spec_.path},
                   {"balloon_bytes", balloon_bytes_},
                   {"balloon", format_bytes(balloon_bytes_)},
                   {"use_percent_before", std::round(use_before_ * 10) / 10},
                   {"use_percent_after", std::round(use_after_ * 10) / 10},
                   {"free_after_bytes", free_after_},
                   {"min_free_bytes", spec_.min_free_bytes}};
  if (!balloon_.empty()) j["balloon_file"] = balloon_;
  return j;
}

Status DiskFill::apply(UndoJournal& journal) {
  std::string dir = spec_.path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  balloon_ = dir + "/.faultline-balloon-" + journal.state().unique_name();
  FL_TRY(journal.record(undo::unlink(balloon_, 0, 0)));  // before the file exists: see undo::unlink
  UniqueFd fd(::open(balloon_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return errno_error("cannot create the balloon " + balloon_);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error("cannot stat " + balloon_);
  FL_TRY(journal.amend_last(undo::unlink(balloon_, st.st_dev, st.st_ino)));
  int rc = ::fallocate(fd.get(), 0, 0, static_cast<off_t>(balloon_bytes_));
  if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
    FL_TRY(write_out(fd.get(), balloon_bytes_, balloon_));
  } else if (rc != 0) {
    return errno_error("cannot allocate " + format_bytes(balloon_bytes_) + " for the balloon " + balloon_);
  }
  if (::fsync(fd.get()) != 0) return errno_error("cannot fsync the balloon " + balloon_);
  return {};
}

nlohmann::json DiskFill::observe() {
  auto fs = fs_usage(spec_.path);
  struct stat st {};
  uint64_t held = ::stat(balloon_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
  double use = fs ? fs->use_percent() : 0;
  return {{"use_percent", std::round(use * 10) / 10},
          {"free_bytes", fs ? fs->available : 0},
          {"balloon_bytes", held},
          {"text", "use " + pct(use) + " (balloon " + format_bytes(held) + ")"}};
}

Status DiskFill::check() {
  struct stat st {};
  if (!balloon_.empty() && ::stat(balloon_.c_str(), &st) != 0)
    return make_error(ENOENT, "the balloon " + balloon_ + " was deleted from outside");
  return {};
}

}  // namespace faultline
