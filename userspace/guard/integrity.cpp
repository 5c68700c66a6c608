// The integrity baseline: a walk of each path, a digest per regular file.
#include "userspace/guard/integrity.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "base/unique_fd.h"

namespace faultline {
namespace {

std::string to_hex(const unsigned char* md, unsigned int len) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

// Every regular file below dir (not following symbolic links), into out.
void walk(const std::string& dir, std::map<std::string, std::string>& out) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) {
    out[dir + "/"] = "unreadable: " + std::string(std::strerror(errno));
    return;
  }
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string p = dir + "/" + name;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;  // gone meanwhile
    if (S_ISDIR(st.st_mode))
      walk(p, out);
    else if (S_ISREG(st.st_mode))
      out[p] = integrity_digest(p);
  }
}

}  // namespace

const char* integrity_change_name(IntegrityChangeKind k) {
  switch (k) {
    case IntegrityChangeKind::created:
      return "created";
    case IntegrityChangeKind::modified:
      return "modified";
    case IntegrityChangeKind::removed:
      return "removed";
  }
  return "?";
}

std::string integrity_digest(const std::string& path) {
  auto d = sha256_file(path);
  return d ? *d : "unreadable: " + std::string(std::strerror(d.error().err));
}

Result<std::string> sha256_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) return errno_error(path);
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return make_error(ENOMEM, "sha256: " + path);
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(path);
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf, static_cast<size_t>(n));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) return make_error(EIO, "sha256: " + path);
  return to_hex(md, len);
}

Result<IntegrityBaseline> IntegrityBaseline::take(std::vector<std::string> paths) {
  for (std::string& p : paths) {
    if (p.empty()) return make_error(0, "an empty path");
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return make_error(0, p + ": neither a file nor a folder");
      continue;
    }
    if (errno != ENOENT) return errno_error(p);
    // Not there yet: its folder must be, so that a typo is not watched for ever.
    const size_t slash = p.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
    struct stat dst {};
    if (::stat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode))
      return make_error(0, p + ": no such file, and its folder " + dir + " does not exist");
  }
  IntegrityBaseline b;
  b.paths_ = std::move(paths);
  b.digests_ = b.scan();
  return b;
}

std::map<std::string, std::string> IntegrityBaseline::scan() const {
  std::map<std::string, std::string> out;
  for (const std::string& p : paths_) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode))
      walk(p, out);
    else if (S_ISREG(st.st_mode))
      out[p] = integrity_digest(p);
  }
  return out;
}

std::vector<IntegrityChange> IntegrityBaseline::recheck() {
  std::map<std::string, std::string> now = scan();
  std::vector<IntegrityChange> out;
  auto a = digests_.begin();
  auto b = now.begin();
  while (a != digests_.end() || b != now.end()) {
    if (b == now.end() || (a != digests_.end() && a->first < b->first)) {
      out.push_back({IntegrityChangeKind::removed, a->first, a->second, ""});
      ++a;
    } else if (a == digests_.end() || b->first < a->first) {
      out.push_back({IntegrityChangeKind::created, b->first, "", b->second});
      ++b;
    } else {
      if (a->second != b->second) out.push_back({IntegrityChangeKind::modified, a->first, a->second, b->second});
      ++a;
      ++b;
    }
  }
  digests_ = std::move(now);
  return out;
}

}  // namespace faultline
