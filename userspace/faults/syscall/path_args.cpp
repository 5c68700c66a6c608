// The path arguments of file syscalls, and lexical path matching for --path.
#include "userspace/faults/syscall/path_args.h"

namespace faultline {
namespace {

struct PathSyscall {
  const char* name;
  PathArg first;
  PathArg second{-1, -1};  // path -1: none
};

// Argument indexes as the kernel numbers them (syscall(2) order). A name this
// architecture lacks (open, stat on arm64) is refused by --syscall before this.
constexpr PathSyscall kPathSyscalls[] = {
    {"open", {0, -1}},
    {"creat", {0, -1}},
    {"openat", {1, 0}},
    {"openat2", {1, 0}},
    {"stat", {0, -1}},
    {"lstat", {0, -1}},
    {"newfstatat", {1, 0}},
    {"statx", {1, 0}},
    {"access", {0, -1}},
    {"faccessat", {1, 0}},
    {"faccessat2", {1, 0}},
    {"unlink", {0, -1}},
    {"unlinkat", {1, 0}},
    {"rename", {0, -1}, {1, -1}},
    {"renameat", {1, 0}, {3, 2}},
    {"renameat2", {1, 0}, {3, 2}},
    {"link", {0, -1}, {1, -1}},
    {"linkat", {1, 0}, {3, 2}},
    {"symlink", {1, -1}},  // arg0 is the link's content, not a lookup
    {"symlinkat", {2, 1}},
    {"mkdir", {0, -1}},
    {"mkdirat", {1, 0}},
    {"rmdir", {0, -1}},
    {"mknod", {0, -1}},
    {"mknodat", {1, 0}},
    {"readlink", {0, -1}},
    {"readlinkat", {1, 0}},
    {"chmod", {0, -1}},
    {"fchmodat", {1, 0}},
    {"fchmodat2", {1, 0}},
    {"chown", {0, -1}},
    {"lchown", {0, -1}},
    {"fchownat", {1, 0}},
    {"truncate", {0, -1}},
    {"utime", {0, -1}},
    {"utimes", {0, -1}},
    {"utimensat", {1, 0}},
    {"futimesat", {1, 0}},
    {"chdir", {0, -1}},
    {"chroot", {0, -1}},
    {"statfs", {0, -1}},
    {"execve", {0, -1}},
    {"execveat", {1, 0}},
    {"getxattr", {0, -1}},
    {"lgetxattr", {0, -1}},
    {"setxattr", {0, -1}},
    {"lsetxattr", {0, -1}},
    {"listxattr", {0, -1}},
    {"llistxattr", {0, -1}},
    {"removexattr", {0, -1}},
    {"lremovexattr", {0, -1}},
};

}  // namespace

std::vector<PathArg> path_args_of(std::string_view syscall) {
  for (const auto& s : kPathSyscalls) {
    if (syscall != s.name) continue;
    std::vector<PathArg> v{s.first};
    if (s.second.path >= 0) v.push_back(s.second);
    return v;
  }
  return {};
}

std::string path_syscall_names() {
  std::string n;
  for (const auto& s : kPathSyscalls) n += (n.empty() ? "" : ", ") + std::string(s.name);
  return n;
}

std::string normalize_path(std::string_view p) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view c = p.substr(i, j - i);
    if (c == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!c.empty() && c != ".") {
      parts.push_back(c);
    }
    i = j + 1;
  }
  std::string out;
  for (auto c : parts) {
    out += '/';
    out += c;
  }
  return out.empty() ? "/" : out;
}

std::string resolve_path(std::string_view base, std::string_view rel) {
  if (!rel.empty() && rel.front() == '/') return normalize_path(rel);
  std::string joined(base);
  joined += '/';
  joined += rel;
  return normalize_path(joined);
}

bool under_prefix(std::string_view path, std::string_view prefix) {
  if (prefix == "/") return !path.empty() && path.front() == '/';
  if (path.size() < prefix.size() || path.substr(0, prefix.size()) != prefix) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

}  // namespace faultline
