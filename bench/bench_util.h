// Shared by the benchmark programs: clocks, median and spread, child processes,
// and the summary rows scripts/bench.sh prints at the end.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <signal.h>
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
  int out = -1;  // read end of its stdout
  uint64_t exec_ns = 0;  // CLOCK_MONOTONIC just before execve, written by the child
};

// Shared page the child writes its pre-exec timestamp into.
inline volatile uint64_t* exec_stamp_page() {
  static volatile uint64_t* page = [] {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return static_cast<volatile uint64_t*>(p == MAP_FAILED ? nullptr : p);
  }();
  return page;
}

// fork + execvp. The child takes CLOCK_MONOTONIC as its very last step before
// execve; the parent reads it back from a shared page once the exec happened.
enum class Out { Inherit, Capture, Null };

inline Child spawn(const std::vector<std::string>& argv, Out out_mode, bool quiet_stderr = false) {
  const bool capture_stdout = out_mode == Out::Capture;
  Child c;
  int pfd[2] = {-1, -1};
  if (capture_stdout && pipe2(pfd, O_CLOEXEC) != 0) return c;
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) return c;  // closes on exec: EOF tells the parent
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  volatile uint64_t* stamp = exec_stamp_page();
  pid_t pid = fork();
  if (pid == 0) {
    if (capture_stdout) dup2(pfd[1], STDOUT_FILENO);
    if (quiet_stderr || out_mode == Out::Null) {
      int dn = open("/dev/null", O_WRONLY);
      if (dn >= 0 && quiet_stderr) dup2(dn, STDERR_FILENO);
      if (dn >= 0 && out_mode == Out::Null) dup2(dn, STDOUT_FILENO);
    }
    signal(SIGPIPE, SIG_DFL);
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (stamp != nullptr) *stamp = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(sync[1]);
  char b;
  while (read(sync[0], &b, 1) < 0 && errno == EINTR) {
  }
  close(sync[0]);
  c.pid = pid;
  c.exec_ns = stamp != nullptr ? *stamp : 0;
  if (capture_stdout) {
    close(pfd[1]);
    c.out = pfd[0];
  }
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
inline int wait_child(Child& c, int timeout_ms = 30'000) {
  if (c.pid <= 0) return -1;
  uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000ULL;
  int st = 0;
  for (;;) {
    pid_t r = waitpid(c.pid, &st, WNOHANG);
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
  c.pid = -1;
  if (c.out >= 0) close(c.out);
  c.out = -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
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
