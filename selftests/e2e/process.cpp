// fork/exec with pipes and a parent-death signal; polling reads so a chatty child never blocks.
#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace fle2e {
namespace {

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/sbin:/usr/bin:/sbin:/bin";
  dirs += ":/usr/sbin:/sbin";  // ip and tc live here; a test runner's PATH may lack them
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string full = dir + "/" + name;
    if (!dir.empty() && ::access(full.c_str(), X_OK) == 0) return full;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  throw std::runtime_error("program not found on PATH: " + name);
}

void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

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

}  // namespace

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

std::string ExitStatus::str() const {
  if (exited) return "exit code " + std::to_string(code);
  if (signal != 0) return std::string("killed by signal ") + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "still running";
}

Process Process::spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  if (argv.empty()) throw std::runtime_error("spawn: empty argv");
  // Everything the child needs is built before fork: after it, only exec-safe calls.
  std::string prog = find_program(argv[0]);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const auto& x : extra_env) overridden |= x.substr(0, x.find('=')) == key;
    if (!overridden) env_store.push_back(kv);
  }
  env_store.insert(env_store.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> cenv;
  for (auto& kv : env_store) cenv.push_back(kv.data());
  cenv.push_back(nullptr);

  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(prog.c_str(), cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  Process p;
  p.pid_ = pid;
  p.out_fd_ = out[0];
  p.err_fd_ = err[0];
  set_nonblock(p.out_fd_);
  set_nonblock(p.err_fd_);
  for (const auto& a : argv) p.cmdline_ += (p.cmdline_.empty() ? "" : " ") + a;
  return p;
}

Process::Process(Process&& o) noexcept { *this = std::move(o); }

Process& Process::operator=(Process&& o) noexcept {
  if (this == &o) return *this;
  kill_and_reap();
  close_pipes();
  pid_ = o.pid_;
  out_fd_ = o.out_fd_;
  err_fd_ = o.err_fd_;
  cmdline_ = std::move(o.cmdline_);
  out_ = std::move(o.out_);
  err_ = std::move(o.err_);
  line_pos_ = o.line_pos_;
  status_ = o.status_;
  o.pid_ = -1;
  o.out_fd_ = o.err_fd_ = -1;
  return *this;
}

Process::~Process() {
  kill_and_reap();
  close_pipes();
}

void Process::close_pipes() {
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
  out_fd_ = err_fd_ = -1;
}

void Process::kill_and_reap() {
  if (pid_ <= 0 || status_) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  if (::waitpid(pid_, &st, 0) == pid_) status_ = decode(st);
  pump(0);
}

void Process::signal(int sig) const {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

void Process::pump(int timeout_ms) {
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

std::optional<ExitStatus> Process::poll_exit() {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    status_ = decode(st);
    pump(0);
    pump(0);
  }
  return status_;
}

bool Process::running() { return !poll_exit().has_value(); }

std::optional<ExitStatus> Process::wait(Millis timeout) {
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout.count()) * 1'000'000ULL;
  for (;;) {
    if (auto s = poll_exit()) return s;
    if (now_ns() >= deadline) return std::nullopt;
    pump(5);
  }
}

std::optional<std::string> Process::wait_line(const std::function<bool(const std::string&)>& pred, Millis timeout) {
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout.count()) * 1'000'000ULL;
  for (;;) {
    size_t nl;
    while ((nl = out_.find('\n', line_pos_)) != std::string::npos) {
      std::string line = out_.substr(line_pos_, nl - line_pos_);
      line_pos_ = nl + 1;
      if (pred(line)) return line;
    }
    if (status_ || now_ns() >= deadline) return std::nullopt;
    pump(5);
    (void)poll_exit();
  }
}

std::optional<std::string> Process::wait_line_starting(const std::string& prefix, Millis timeout) {
  return wait_line([&](const std::string& l) { return l.rfind(prefix, 0) == 0; }, timeout);
}

std::string Process::describe() const {
  std::string s = "`" + cmdline_ + "` (" + (status_ ? status_->str() : std::string("running")) + ")";
  if (!out_.empty()) s += "\n--- stdout ---\n" + out_;
  if (!err_.empty()) s += "\n--- stderr ---\n" + err_;
  return s;
}

std::string CommandResult::describe() const {
  std::string s = "`" + cmdline + "` (" + status.str() + ")";
  if (!out.empty()) s += "\n--- stdout ---\n" + out;
  if (!err.empty()) s += "\n--- stderr ---\n" + err;
  return s;
}

CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                          Millis timeout) {
  Process p = Process::spawn(argv, extra_env);
  CommandResult r;
  auto st = p.wait(timeout);
  if (!st) {
    p.kill_and_reap();
    st = p.poll_exit();
  }
  r.status = st.value_or(ExitStatus{});
  r.out = p.out();
  r.err = p.err();
  for (const auto& a : argv) r.cmdline += (r.cmdline.empty() ? "" : " ") + a;
  return r;
}

}  // namespace fle2e
