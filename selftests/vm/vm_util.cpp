// Process, probe and cgroup helpers for the VM tests.
#include "vm_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace flvm {
namespace {

uint64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1'000'000;
}

[[noreturn]] void exec_or_die(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  ::execvp(a[0], a.data());
  std::fprintf(stderr, "exec %s: %s\n", a[0], strerror(errno));
  _exit(127);
}

int decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string bin(const std::string& name) {
  const char* dir = std::getenv("FL_VM_BIN");
  return std::string(dir != nullptr ? dir : "/opt/faultline") + "/" + name;
}

Ran run(const std::vector<std::string>& argv, int timeout_ms) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    exec_or_die(argv);
  }
  ::close(p[1]);
  Ran r;
  const uint64_t end = now_ms() + static_cast<uint64_t>(timeout_ms);
  char buf[4096];
  for (;;) {
    int left = static_cast<int>(end > now_ms() ? end - now_ms() : 0);
    pollfd pf{p[0], POLLIN, 0};
    if (left == 0 || ::poll(&pf, 1, left) <= 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::close(p[0]);
      r.code = -1;
      return r;
    }
    ssize_t n = ::read(p[0], buf, sizeof(buf));
    if (n <= 0) break;
    r.out.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.code = decode(status);
  return r;
}

Ran run_in(const std::string& ns, const std::vector<std::string>& argv, int timeout_ms) {
  std::vector<std::string> a = {"nsenter", "--net=/run/netns/" + ns};
  a.insert(a.end(), argv.begin(), argv.end());
  return run(a, timeout_ms);
}

Background::Background(const std::vector<std::string>& argv) {
  static int seq = 0;
  file_ = "/tmp/flvm-bg-" + std::to_string(::getpid()) + "-" + std::to_string(++seq) + ".out";
  pid_ = ::fork();
  if (pid_ == 0) {
    int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    exec_or_die(argv);
  }
}

Background::Background(Background&& o) noexcept : pid_(o.pid_), file_(std::move(o.file_)), code_(o.code_) {
  o.pid_ = -1;
}

Background::~Background() {
  if (pid_ > 0 && !code_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (!file_.empty()) ::unlink(file_.c_str());
}

std::string Background::out() const { return read_file(file_); }

bool Background::wait_for(const std::string& needle, int timeout_ms) {
  const uint64_t end = now_ms() + static_cast<uint64_t>(timeout_ms);
  while (now_ms() < end) {
    if (out().find(needle) != std::string::npos) return true;
    if (code_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      code_ = decode(status);
      return out().find(needle) != std::string::npos;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::optional<int> Background::wait(int timeout_ms) {
  const uint64_t end = now_ms() + static_cast<uint64_t>(timeout_ms);
  while (!code_) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      code_ = decode(status);
      break;
    }
    if (now_ms() >= end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return code_;
}

void Background::signal(int sig) const {
  if (pid_ > 0 && !code_) ::kill(pid_, sig);
}

Probe::Probe(const std::string& cgroup) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("socketpair");
  pid_ = ::fork();
  if (pid_ == 0) {
    if (!cgroup.empty()) {
      int fd = ::open((cgroup + "/cgroup.procs").c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, "0", 1) != 1) _exit(126);
      ::close(fd);
    }
    ::dup2(sv[1], 3);  // dup2 clears close-on-exec
    exec_or_die({bin("fl-vmprobe"), "serve"});
  }
  ::close(sv[1]);
  sock_ = sv[0];
}

Probe::~Probe() {
  ::close(sock_);
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

std::string Probe::call(const std::string& op, int timeout_ms) {
  std::string line = op + "\n";
  if (::send(sock_, line.data(), line.size(), MSG_NOSIGNAL) < 0) return "EOF";
  std::string got;
  const uint64_t end = now_ms() + static_cast<uint64_t>(timeout_ms);
  char c;
  while (true) {
    pollfd pf{sock_, POLLIN, 0};
    int left = static_cast<int>(end > now_ms() ? end - now_ms() : 0);
    if (left == 0 || ::poll(&pf, 1, left) <= 0) return "TIMEOUT";
    ssize_t n = ::recv(sock_, &c, 1, 0);
    if (n <= 0) return "EOF";
    if (c == '\n') return got;
    got += c;
  }
}

std::string cgroup2_mount() {
  std::ifstream in("/proc/self/mounts");
  std::string dev, mnt, type;
  std::string rest;
  while (in >> dev >> mnt >> type && std::getline(in, rest)) {
    if (type == "cgroup2") return mnt;
  }
  return "";
}

TestCgroup::TestCgroup(const std::string& rel) : path_(cgroup2_mount() + "/" + rel) {
  if (::mkdir(path_.c_str(), 0755) != 0 && errno != EEXIST) throw std::runtime_error("mkdir " + path_);
}

TestCgroup::~TestCgroup() {
  for (int i = 0; i < 100; ++i) {
    if (::rmdir(path_.c_str()) == 0 || errno == ENOENT) return;
    std::ifstream procs(path_ + "/cgroup.procs");
    for (pid_t p; procs >> p;) ::kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

PingResult ping(const std::string& ns, const std::string& addr, int count, const std::string& interval) {
  PingResult p;
  // By full path: busybox's nsenter would run its own ping applet first.
  auto r = run_in(ns, {"/usr/bin/ping", "-n", "-c", std::to_string(count), "-i", interval, "-W", "1", addr}, 120'000);
  p.raw = r.out;
  static const std::regex rtt(R"(time=([0-9.]+) ms)");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), rtt); it != std::sregex_iterator(); ++it)
    p.rtt_ms.push_back(std::stod((*it)[1]));
  std::smatch m;
  static const std::regex summary(R"((\d+) packets transmitted, (\d+) received)");
  if (std::regex_search(r.out, m, summary)) {
    p.sent = std::stoi(m[1]);
    p.received = std::stoi(m[2]);
  }
  return p;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double m = mean(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace flvm
