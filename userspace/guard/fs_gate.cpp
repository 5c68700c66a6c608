// fanotify permission events on the command's own mounts, a thread that
// answers them, and the reaper that keeps the gate from failing open.
#include "userspace/guard/fs_gate.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/fanotify.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <sstream>

#include "base/files.h"
#include "base/sha256.h"

namespace faultline {
namespace {

constexpr uint64_t kPermMask = FAN_OPEN_PERM | FAN_OPEN_EXEC_PERM;

std::string opened_path(int fd) {
  char target[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
  if (n <= 0 || n >= static_cast<ssize_t>(sizeof target)) return {};
  return std::string(target, static_cast<size_t>(n));
}

// The whole file behind fd, read from its start (pread: the opener's offset stays).
std::optional<std::string> read_whole(int fd, uint64_t size) {
  std::string data(size, '\0');
  uint64_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, data.data() + got, size - got, static_cast<off_t>(got));
    if (n <= 0) return std::nullopt;
    got += static_cast<uint64_t>(n);
  }
  return data;
}

// Mountinfo escapes spaces and friends as three octal digits (\040).
std::string mountinfo_unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7') {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

void say_in_child(const char* what) { (void)!::write(STDERR_FILENO, what, std::strlen(what)); }

}  // namespace

Result<DeniedExecutable> denied_executable(const std::string& path) {
  DeniedExecutable d;
  d.given = path;
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) return errno_error(path);
  d.path = real;
  UniqueFd fd(::open(real, O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error(path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(path);
  if (!S_ISREG(st.st_mode)) return make_error(EINVAL, path + ": not a regular file");
  d.dev = st.st_dev;
  d.ino = st.st_ino;
  d.size = static_cast<uint64_t>(st.st_size);
  auto data = read_whole(fd.get(), d.size);
  if (!data) return make_error(EIO, path + ": cannot be read whole");
  d.sha256 = sha256_hex(*data);
  return d;
}

std::string fs_rule_for(const FsGateOptions& o, const std::string& path) {
  for (const std::string& s : o.deny)
    if (path.find(s) != std::string::npos) return "--fs-deny " + s;
  if (!o.default_deny) return {};
  for (const std::string& s : o.allow)
    if (path.find(s) != std::string::npos) return {};
  return "default";
}

Result<std::unique_ptr<FsGate>> FsGate::create(FsGateOptions opts) {
  std::unique_ptr<FsGate> g(new FsGate(std::move(opts)));
  g->fan_.reset(
      ::fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_UNLIMITED_QUEUE, O_RDONLY | O_LARGEFILE | O_CLOEXEC));
  if (!g->fan_) return errno_error("fanotify_init(FAN_CLASS_CONTENT)");
  for (UniqueFd* p : {g->ready_, g->ack_, g->stop_}) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return errno_error("pipe");
    p[0].reset(fds[0]);
    p[1].reset(fds[1]);
  }
  return g;
}

FsGate::~FsGate() { stop(); }

bool FsGate::prepare_in_child() const {
  // A mount namespace of our own, every mount in it private: its mounts are
  // copies that only this command (and what it starts) uses, so the marks on
  // them make no outside process wait.
  if (::unshare(CLONE_NEWNS) != 0) {
    say_in_child("faultctl guard: --enforce-fs: cannot make a mount namespace for the command\n");
    return false;
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    say_in_child("faultctl guard: --enforce-fs: cannot make the command's mounts private\n");
    return false;
  }
  char c = 'r';
  if (::write(ready_[1].get(), &c, 1) != 1) return false;
  return ::read(ack_[0].get(), &c, 1) == 1 && c == 'y';
}

void FsGate::serve(pid_t child) {
  ready_[1].reset();  // the child's ends: an EOF says it died before its namespace was made
  ack_[0].reset();
  thread_ = std::thread([this, child] { run(child); });
}

bool FsGate::mark_mounts(pid_t child) {
  const std::string root = "/proc/" + std::to_string(child) + "/root";
  auto info = read_text_file("/proc/" + std::to_string(child) + "/mountinfo");
  if (!info) return false;
  std::istringstream in(*info);
  bool root_marked = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string f[5];
    for (auto& w : f) words >> w;
    const std::string mount_point = mountinfo_unescape(f[4]);
    if (mount_point.empty()) continue;
    // Through the child's root: the path names its copy of the mount.
    const std::string path = root + (mount_point == "/" ? "" : mount_point);
    if (::fanotify_mark(fan_.get(), FAN_MARK_ADD | FAN_MARK_MOUNT, kPermMask, AT_FDCWD, path.c_str()) == 0) {
      mounts_.fetch_add(1);
      root_marked = root_marked || mount_point == "/";
    }
  }
  return root_marked;
}

void FsGate::run(pid_t child) {
  char c = 0;
  if (::read(ready_[0].get(), &c, 1) != 1) return;  // the child failed before its namespace
  const char ok = mark_mounts(child) ? 'y' : 'n';
  if (ok == 'n') {
    const std::string line = "faultctl guard: --enforce-fs: the command's root mount could not be marked\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
  }
  (void)!::write(ack_[1].get(), &ok, 1);
  ack_[1].reset();
  if (ok == 'n') return;
  alignas(fanotify_event_metadata) char buf[8192];
  for (;;) {
    pollfd p[2] = {{fan_.get(), POLLIN, 0}, {stop_[0].get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    const ssize_t n = ::read(fan_.get(), buf, sizeof buf);
    if (n <= 0) continue;
    auto len = static_cast<size_t>(n);
    for (auto* m = reinterpret_cast<fanotify_event_metadata*>(buf); FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len)) {
      if (m->vers != FANOTIFY_METADATA_VERSION) return;
      if (m->fd < 0) continue;
      answer(m->fd, m->mask, m->pid);
      ::close(m->fd);
    }
  }
}

std::string FsGate::exec_rule(int fd, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return {};
  for (const DeniedExecutable& d : opts_.deny_exec) {
    if (st.st_dev == d.dev && st.st_ino == d.ino) return "--fs-deny-exec " + d.given;
    if (static_cast<uint64_t>(st.st_size) != d.size) continue;
    auto data = read_whole(fd, d.size);
    if (data && sha256_hex(*data) == d.sha256) return "--fs-deny-exec " + d.given + " (the same content)";
  }
  return {};
}

void FsGate::answer(int event_fd, uint64_t mask, pid_t pid) {
  judged_.fetch_add(1);
  FsDecision d;
  d.pid = pid;
  d.exec = (mask & FAN_OPEN_EXEC_PERM) != 0;
  d.path = opened_path(event_fd);
  struct stat st {};
  if (::fstat(event_fd, &st) == 0) d.rule = exec_rule(event_fd, st);
  if (d.rule.empty()) d.rule = fs_rule_for(opts_, d.path);
  d.blocked = !d.rule.empty() && opts_.enforce;
  // Said before the answer: a refused open may end the command at once.
  if (!d.rule.empty()) {
    denied_.fetch_add(1);
    if (opts_.on_denied) opts_.on_denied(d);
  }
  fanotify_response r{};
  r.fd = event_fd;
  r.response = d.blocked ? FAN_DENY : FAN_ALLOW;
  (void)!::write(fan_.get(), &r, sizeof r);
}

Status FsGate::start_reaper(int cgroup_root, const std::string& kill_file) {
  int life[2];
  if (::pipe2(life, O_CLOEXEC) != 0) return errno_error("pipe");
  const int fan = fan_.get();
  const std::string said = "faultline guard: the guard is gone: its reaper killed the command (" + kill_file + ")\n";
  const pid_t pid = ::fork();
  if (pid < 0) {
    Error e = errno_error("fork (the --enforce-fs reaper)");
    ::close(life[0]);
    ::close(life[1]);
    return e;
  }
  if (pid == 0) {
    // Async-signal-safe from here: we are the child of a threaded process.
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::sigaction(sig, &ign, nullptr);
    // Keep stdio, the group's fd (3), the life pipe (4) and the cgroup root
    // (5); close the rest (the guard's sockets, listeners, pipes) so that
    // nothing else of the guard's is held open by us.
    const int keep[3] = {::fcntl(fan, F_DUPFD, 6), ::fcntl(life[0], F_DUPFD, 6), ::fcntl(cgroup_root, F_DUPFD, 6)};
    for (int i = 0; i < 3; ++i)
      if (keep[i] < 0 || ::dup2(keep[i], 3 + i) < 0) ::_exit(1);
    ::syscall(SYS_close_range, 6u, ~0u, 0u);
    for (;;) {
      char c = 0;
      const ssize_t n = ::read(4, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n == 1 && c == 'd') ::_exit(0);  // goodbye: the command is gone, nothing to kill
      if (n == 1) continue;
      // EOF: the guard died without goodbye. Kill first, then let go of the group.
      const int k = ::openat(5, kill_file.c_str(), O_WRONLY | O_CLOEXEC);
      if (k >= 0) {
        (void)!::write(k, "1", 1);
        ::close(k);
      }
      (void)!::write(STDERR_FILENO, said.data(), said.size());
      ::_exit(0);
    }
  }
  ::close(life[0]);
  reaper_life_.reset(life[1]);
  reaper_ = pid;
  return {};
}

void FsGate::stop() {
  if (stop_[1]) (void)!::write(stop_[1].get(), "s", 1);
  if (thread_.joinable()) thread_.join();
  if (reaper_ > 0) {
    (void)!::write(reaper_life_.get(), "d", 1);
    reaper_life_.reset();
    int status = 0;
    while (::waitpid(reaper_, &status, 0) < 0 && errno == EINTR) {
    }
    reaper_ = 0;
  }
}

}  // namespace faultline
