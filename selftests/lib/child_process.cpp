// fork/exec with a parent-death signal; output read by polling (pipes) or by
// position (files), so that a chatty child never blocks and a test never hangs.
#include "selftests/lib/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace fltest {
namespace {

uint64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1'000'000;
}

// Milliseconds left until deadline, capped (for one poll or sleep).
int left_ms(uint64_t deadline, int cap) {
  uint64_t now = now_ms();
  return now >= deadline ? 0 : static_cast<int>(std::min<uint64_t>(deadline - now, static_cast<uint64_t>(cap)));
}

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  dirs += ":/usr/sbin:/sbin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string full = dir + "/" + name;
    if (!dir.empty() && ::access(full.c_str(), X_OK) == 0) return full;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return name;  // execve fails, and the child says so
}

ExitStatus decode(int st) {
  ExitStatus s;
  if (WIFEXITED(st)) {
    s.exited = true;
    s.code = WEXITSTATUS(st);
  } else if (WIFSIGNALED(st)) {
    s.signal = WTERMSIG(st);
  }
  return s;
}

[[noreturn]] void fail_spawn(const char* what) {
  throw std::runtime_error(std::string("spawn: ") + what + ": " + std::strerror(errno));
}

// An unlinked file in $TMPDIR (or /tmp) for a child's output.
int output_file() {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/fltest-out.XXXXXX";
  int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) fail_spawn(("mkostemp " + path).c_str());
  ::unlink(path.c_str());
  return fd;
}

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string describe_run(const std::string& cmdline, const std::string& status, const std::string& out,
                         const std::string& err) {
  std::string s = "`" + cmdline + "` (" + status + ")";
  if (!out.empty()) s += "\n--- stdout ---\n" + out;
  if (!err.empty()) s += "\n--- stderr ---\n" + err;
  return s;
}

}  // namespace

std::string ExitStatus::str() const {
  if (exited) return "exit code " + std::to_string(code);
  if (signal != 0) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "still running";
}

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv, const SpawnOptions& o) {
  if (argv.empty()) throw std::runtime_error("spawn: empty argv");
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  const std::string prog = find_program(argv[0]);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const auto& x : o.env) overridden |= x.substr(0, x.find('=')) == key;
    if (!overridden) env_store.push_back(kv);
  }
  env_store.insert(env_store.end(), o.env.begin(), o.env.end());
  std::vector<char*> cenv;
  for (auto& kv : env_store) cenv.push_back(kv.data());
  cenv.push_back(nullptr);
  const std::string procs = o.cgroup.empty() ? "" : o.cgroup + "/cgroup.procs";
  const std::string exec_failed = "cannot run " + prog + ": ";

  ChildProcess c;  // owns every fd made below, so a throw closes them
  c.output_ = o.output;
  c.stop_grace_ = o.stop_grace;
  c.cmdline_ = join(argv);
  int child_out = -1, child_err = -1, child_in = -1;
  // The child's ends of its pipes: closed in the parent once it forked. With
  // files, parent and child share one descriptor (read with pread at our offset).
  auto close_child_ends = [&] {
    for (int fd : {child_out, child_err, child_in}) {
      if (fd >= 0 && fd != c.out_fd_ && fd != c.err_fd_) ::close(fd);
    }
  };
  try {
    if (o.output == Output::kPipes) {
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0) fail_spawn("pipe");
      c.out_fd_ = p[0];
      child_out = p[1];
      if (!o.merge_stderr) {
        if (::pipe2(p, O_CLOEXEC) != 0) fail_spawn("pipe");
        c.err_fd_ = p[0];
        child_err = p[1];
      }
    } else {
      c.out_fd_ = child_out = output_file();
      if (!o.merge_stderr) c.err_fd_ = child_err = output_file();
    }
    if (o.stdin_pipe) {
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0) fail_spawn("pipe");
      child_in = p[0];
      c.in_fd_ = p[1];
    }
  } catch (...) {
    close_child_ends();
    throw;
  }
  const int child_stderr = o.merge_stderr ? child_out : child_err;

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    close_child_ends();
    fail_spawn("fork");
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before the line above
    if (o.own_process_group) ::setpgid(0, 0);
    if (!procs.empty()) {
      int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(126);
      ::close(fd);
    }
    int in = child_in >= 0 ? child_in : ::open("/dev/null", O_RDONLY);
    ::dup2(in, STDIN_FILENO);
    ::dup2(child_out, STDOUT_FILENO);
    ::dup2(child_stderr, STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(prog.c_str(), cargv.data(), cenv.data());
    const char* why = std::strerror(errno);
    (void)!::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    (void)!::write(STDERR_FILENO, why, std::strlen(why));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  close_child_ends();
  c.pid_ = pid;
  if (c.output_ == Output::kPipes) {
    for (int fd : {c.out_fd_, c.err_fd_}) {
      if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
  }
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept { *this = std::move(o); }

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this == &o) return *this;
  if (stop_grace_ > 0ms) {
    stop(stop_grace_);
  } else {
    kill_and_reap();
  }
  close_fds();
  pid_ = o.pid_;
  output_ = o.output_;
  out_fd_ = o.out_fd_;
  err_fd_ = o.err_fd_;
  in_fd_ = o.in_fd_;
  out_off_ = o.out_off_;
  err_off_ = o.err_off_;
  stop_grace_ = o.stop_grace_;
  cmdline_ = std::move(o.cmdline_);
  out_ = std::move(o.out_);
  err_ = std::move(o.err_);
  line_pos_ = o.line_pos_;
  status_ = o.status_;
  o.pid_ = -1;
  o.out_fd_ = o.err_fd_ = o.in_fd_ = -1;
  return *this;
}

ChildProcess::~ChildProcess() {
  if (stop_grace_ > 0ms) {
    stop(stop_grace_);
  } else {
    kill_and_reap();
  }
  close_fds();
}

void ChildProcess::close_fds() {
  for (int* fd : {&out_fd_, &err_fd_, &in_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void ChildProcess::pump(int timeout_ms) {
  if (output_ == Output::kFiles) {
    bool got = false;
    char buf[8192];
    for (int i = 0; i < 2; ++i) {
      int fd = i == 0 ? out_fd_ : err_fd_;
      off_t& off = i == 0 ? out_off_ : err_off_;
      if (fd < 0) continue;
      for (ssize_t n; (n = ::pread(fd, buf, sizeof(buf), off)) > 0; off += n) {
        (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
        got = true;
      }
    }
    // A file is always readable: sleep a little instead of polling it.
    if (!got && timeout_ms > 0) ::usleep(static_cast<useconds_t>(std::min(timeout_ms, 20)) * 1000);
    return;
  }
  if (out_fd_ < 0 && err_fd_ < 0) {
    if (timeout_ms > 0) ::usleep(static_cast<useconds_t>(timeout_ms) * 1000);
    return;
  }
  pollfd p[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (::poll(p, 2, timeout_ms) <= 0) return;
  char buf[8192];
  for (int i = 0; i < 2; ++i) {
    int& fd = i == 0 ? out_fd_ : err_fd_;
    if (fd < 0) continue;
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n == 0) {  // end of file: stop polling it, or poll would spin on POLLHUP
        ::close(fd);
        fd = -1;
      }
      if (n <= 0) break;
      (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
    }
  }
}

bool ChildProcess::output_ended() const {
  if (output_ == Output::kFiles) return status_.has_value();
  return out_fd_ < 0 && err_fd_ < 0;
}

void ChildProcess::reaped(int wait_status) {
  status_ = decode(wait_status);
  drain();
}

void ChildProcess::drain() {
  if (output_ == Output::kFiles) {
    pump(0);
    return;
  }
  // Grandchildren may still hold the pipes: read on, for a bounded time.
  const uint64_t end = now_ms() + 2000;
  while ((out_fd_ >= 0 || err_fd_ >= 0) && now_ms() < end) pump(50);
}

std::optional<ExitStatus> ChildProcess::poll_exit() {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) reaped(st);
  return status_;
}

bool ChildProcess::running() { return pid_ > 0 && !poll_exit().has_value(); }

std::optional<ExitStatus> ChildProcess::wait(Millis timeout) {
  const uint64_t deadline = now_ms() + static_cast<uint64_t>(timeout.count());
  for (;;) {
    if (auto s = poll_exit()) return s;
    if (pid_ <= 0 || now_ms() >= deadline) return std::nullopt;
    pump(left_ms(deadline, 5));
  }
}

bool ChildProcess::wait_for(const std::string& needle, Millis timeout, Stream s) {
  const uint64_t deadline = now_ms() + static_cast<uint64_t>(timeout.count());
  auto found = [&] {
    return (s != Stream::kStderr && out_.find(needle) != std::string::npos) ||
           (s != Stream::kStdout && err_.find(needle) != std::string::npos);
  };
  for (;;) {
    if (output_ == Output::kFiles) (void)poll_exit();  // a file never ends by itself
    pump(0);
    if (found()) return true;
    if (output_ended() || now_ms() >= deadline) return false;
    pump(left_ms(deadline, 100));
  }
}

std::optional<std::string> ChildProcess::wait_line(const std::function<bool(const std::string&)>& pred,
                                                   Millis timeout) {
  const uint64_t deadline = now_ms() + static_cast<uint64_t>(timeout.count());
  for (;;) {
    size_t nl;
    while ((nl = out_.find('\n', line_pos_)) != std::string::npos) {
      std::string line = out_.substr(line_pos_, nl - line_pos_);
      line_pos_ = nl + 1;
      if (pred(line)) return line;
    }
    if (status_ || now_ms() >= deadline) return std::nullopt;
    pump(left_ms(deadline, 5));
    (void)poll_exit();
  }
}

std::optional<std::string> ChildProcess::wait_line_starting(const std::string& prefix, Millis timeout) {
  return wait_line([&](const std::string& l) { return l.rfind(prefix, 0) == 0; }, timeout);
}

void ChildProcess::write_stdin(const std::string& s) {
  if (in_fd_ >= 0) (void)!::write(in_fd_, s.data(), s.size());
}

void ChildProcess::close_stdin() {
  if (in_fd_ >= 0) ::close(in_fd_);
  in_fd_ = -1;
}

void ChildProcess::signal(int sig) const {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

void ChildProcess::kill_and_reap() {
  if (pid_ <= 0 || status_) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &st, 0)) < 0 && errno == EINTR) {
  }
  if (r == pid_) reaped(st);
}

void ChildProcess::stop(Millis grace) {
  close_stdin();
  if (pid_ <= 0 || status_) return;
  if (grace > 0ms) {
    ::kill(pid_, SIGTERM);
    if (wait(grace)) return;
  }
  kill_and_reap();
}

const std::string& ChildProcess::out() {
  pump(0);
  return out_;
}

const std::string& ChildProcess::err() {
  pump(0);
  return err_;
}

std::string ChildProcess::describe() {
  pump(0);
  return describe_run(cmdline_, status_ ? status_->str() : std::string("running"), out_, err_);
}

std::string CommandResult::describe() const { return describe_run(cmdline, status.str(), out, err); }

CommandResult ChildProcess::finish(Millis timeout) {
  if (!wait(timeout)) kill_and_reap();
  CommandResult r;
  r.status = status_.value_or(ExitStatus{});
  r.out = out();
  r.err = err();
  r.cmdline = cmdline_;
  return r;
}

CommandResult run_command(const std::vector<std::string>& argv, const SpawnOptions& o, Millis timeout) {
  return ChildProcess::spawn(argv, o).finish(timeout);
}

std::vector<std::string> as_nobody(std::vector<std::string> argv) {
  if (::geteuid() != 0) return argv;
  std::vector<std::string> out = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace fltest
