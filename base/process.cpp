// /proc parsing: stat fields, parent chains, boot id.
#include "base/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "base/unique_fd.h"

namespace faultline {

bool ProcessInfo::kernel_thread() const {
  constexpr uint64_t kPfKthread = 0x00200000;
  return (flags & kPfKthread) != 0;
}

Result<ProcessInfo> read_process(int pid) {
  auto text = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  if (!text) return make_error(ESRCH, "no process " + std::to_string(pid));
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'.
  auto open = text->find('(');
  auto close = text->rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open)
    return make_error(EIO, "unexpected /proc/" + std::to_string(pid) + "/stat");
  ProcessInfo p;
  p.pid = pid;
  p.comm = text->substr(open + 1, close - open - 1);
  std::istringstream in(text->substr(close + 2));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string w; in >> w && f.size() < 20;) f.push_back(w);
  if (f.size() < 20) return make_error(EIO, "short /proc/" + std::to_string(pid) + "/stat");
  try {
    p.state = f[0].empty() ? '?' : f[0][0];
    p.ppid = std::stoi(f[1]);
    p.flags = std::stoull(f[6]);
    p.utime = std::stoull(f[11]);
    p.stime = std::stoull(f[12]);
    p.start = std::stoull(f[19]);
  } catch (...) {
    return make_error(EIO, "unparsable /proc/" + std::to_string(pid) + "/stat");
  }
  return p;
}

uint64_t process_start_time(int pid) {
  auto p = read_process(pid);
  return p ? p->start : 0;
}

bool is_alive(const ProcessIdentity& id) {
  if (id.pid <= 0) return false;
  auto p = read_process(id.pid);
  return p && p->start == id.start && p->state != 'Z' && p->state != 'X';
}

std::vector<int> list_pids() {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    out.push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> ancestors_of(int pid) {
  std::vector<int> out;
  std::set<int> seen{pid};
  int cur = pid;
  while (cur > 1) {
    auto p = read_process(cur);
    if (!p || p->ppid <= 0 || seen.contains(p->ppid)) break;
    out.push_back(p->ppid);
    seen.insert(p->ppid);
    cur = p->ppid;
  }
  return out;
}

std::string argv0_basename(int pid) {
  auto cmd = read_text_file("/proc/" + std::to_string(pid) + "/cmdline");
  if (!cmd || cmd->empty()) return "";
  std::string a0 = cmd->substr(0, cmd->find('\0'));
  auto slash = a0.rfind('/');
  return slash == std::string::npos ? a0 : a0.substr(slash + 1);
}

std::string boot_id() {
  auto t = read_text_file("/proc/sys/kernel/random/boot_id");
  if (!t) return "";
  std::string s = *t;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

void close_fds_except(std::initializer_list<int> keep) {
  std::vector<int> k(keep);
  std::sort(k.begin(), k.end());
  unsigned lo = 3;
  for (int fd : k) {
    if (fd < 3) continue;
    if (static_cast<unsigned>(fd) > lo) ::syscall(SYS_close_range, lo, static_cast<unsigned>(fd) - 1, 0);
    lo = static_cast<unsigned>(fd) + 1;
  }
  ::syscall(SYS_close_range, lo, ~0U, 0);
}

}  // namespace faultline
