// Shared by the benchmark programs: clocks, median and spread, child processes,
// and the summary rows scripts/bench.sh prints at the end.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace flbench {

inline uint64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}
inline uint64_t mono_ns() { return clock_ns(CLOCK_MONOTONIC); }
inline uint64_t thread_cpu_ns() { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

inline void sleep_ms(double ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(std::fmod(ms, 1000.0) * 1e6)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Median and min-max of a set of repetitions.
struct Spread {
  double median = NAN, min = NAN, max = NAN;
  size_t n = 0;
};

inline Spread spread(std::vector<double> v) {
  Spread s;
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  size_t m = v.size() / 2;
  s.median = v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  return s;
}

inline std::string fmt(double v, int prec = 1) {
  if (std::isnan(v)) return "n/a";
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", prec, v);
  return b;
}

// "1.23 [1.20-1.31]"
inline std::string fmt_spread(const Spread& s, int prec = 2, const std::string& unit = "") {
  return fmt(s.median, prec) + unit + " [" + fmt(s.min, prec) + "-" + fmt(s.max, prec) + "]";
}

// One line of the final table: tab-separated, appended to the summary file.
struct SummaryRow {
  std::string bench;     // "1 prog-run", "2 veth", "3 apply"
  std::string what;      // the measured case
  std::string absolute;  // absolute figure (median [min-max])
  std::string ratio;     // ratio against the same-run baseline (median [min-max])
  std::string target;    // "<= 1.5x empty", or "-" for report-only
  std::string verdict;   // "MET", "MISSED", "report"
};

inline void append_summary(const std::string& path, const SummaryRow& r) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::app);
  out << r.bench << '\t' << r.what << '\t' << r.absolute << '\t' << r.ratio << '\t' << r.target << '\t' << r.verdict
      << '\n';
}

inline std::string verdict(bool met) { return met ? "MET" : "MISSED"; }

// A child process with its stdout on a pipe we read (or inherited when !capture).
struct Child {
  pid_t pid = -1;
  int out = -1;          // read end of its stdout
  uint64_t exec_ns = 0;  // CLOCK_MONOTONIC just before the spawn (the execve follows)
};

enum class Out { Inherit, Capture, Null };

// posix_spawnp (clone with CLONE_VM|CLONE_VFORK, then execve): unlike fork, the
// child never copies or tears down this process's address space, so a large
// benchmark process does not slow its children down. exec_ns is CLOCK_MONOTONIC
// taken just before the spawn call; the call returns once the execve happened.
inline Child spawn(const std::vector<std::string>& argv, Out out_mode, bool quiet_stderr = false) {
  Child c;
  int pfd[2] = {-1, -1};
  if (out_mode == Out::Capture && pipe2(pfd, O_CLOEXEC) != 0) return c;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out_mode == Out::Capture) posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
  if (out_mode == Out::Null) posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  if (quiet_stderr) posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t def, none;
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  c.exec_ns = mono_ns();
  pid_t pid = -1;
  int err = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (out_mode == Out::Capture) close(pfd[1]);
  if (err != 0) {
    if (out_mode == Out::Capture) close(pfd[0]);
    return c;
  }
  c.pid = pid;
  if (out_mode == Out::Capture) c.out = pfd[0];
  return c;
}

// Reads one line from the child's stdout, waiting at most timeout_ms. False at EOF/timeout.
inline bool read_line(int fd, std::string& line, int timeout_ms) {
  line.clear();
  uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000ULL;
  for (;;) {
    uint64_t now = mono_ns();
    if (now >= deadline) return false;
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>((deadline - now) / 1'000'000ULL) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    char ch;
    ssize_t n = read(fd, &ch, 1);
    if (n == 1) {
      if (ch == '\n') return true;
      line += ch;
      continue;
    }
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Waits for the child; returns its exit status (or -1 on timeout, after SIGKILL).
// With cpu_ms, also the CPU time (user + system) the child used.
inline int wait_child(Child& c, int timeout_ms = 30'000, double* cpu_ms = nullptr) {
  if (c.pid <= 0) return -1;
  uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000ULL;
  int st = 0;
  rusage ru{};
  for (;;) {
    pid_t r = wait4(c.pid, &st, WNOHANG, &ru);
    if (r == c.pid) break;
    if (r < 0) return -1;
    if (mono_ns() > deadline) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &st, 0);
      c.pid = -1;
      if (c.out >= 0) close(c.out);
      c.out = -1;
      return -1;
    }
    sleep_ms(0.2);
  }
  if (cpu_ms != nullptr) {
    *cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  }
  c.pid = -1;
  if (c.out >= 0) close(c.out);
  c.out = -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// CPU time a running process has used so far: the sum over its live threads of
// /proc/PID/task/TID/schedstat (ns on CPU; threads that already exited are missed).
inline double running_cpu_ms(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  double total = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(dir + "/" + e->d_name + "/schedstat");
      unsigned long long ns = 0;
      if (in >> ns) total += static_cast<double>(ns) / 1e6;
    }
    closedir(d);
  }
  return total;
}

inline std::string slurp(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) s.append(buf, static_cast<size_t>(n));
  }
  return s;
}

}  // namespace flbench
