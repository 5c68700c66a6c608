// Commands, fl-vmprobe probes and ping for the VM tests.
#include "vm_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
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

}  // namespace

std::string bin(const std::string& name) {
  const char* dir = std::getenv("FL_VM_BIN");
  return std::string(dir != nullptr ? dir : "/opt/faultline") + "/" + name;
}

CommandResult run(const std::vector<std::string>& argv, Millis timeout) {
  return fltest::run_command(argv, {.merge_stderr = true}, timeout);
}

CommandResult run_in(const std::string& ns, const std::vector<std::string>& argv, Millis timeout) {
  std::vector<std::string> a = {"nsenter", "--net=/run/netns/" + ns};
  a.insert(a.end(), argv.begin(), argv.end());
  return run(a, timeout);
}

ChildProcess start(const std::vector<std::string>& argv) {
  return ChildProcess::spawn(argv, {.output = fltest::Output::kFiles, .merge_stderr = true});
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

std::string Probe::call(const std::string& op, Millis timeout) {
  std::string line = op + "\n";
  if (::send(sock_, line.data(), line.size(), MSG_NOSIGNAL) < 0) return "EOF";
  std::string got;
  const uint64_t end = now_ms() + static_cast<uint64_t>(timeout.count());
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

PingResult ping(const std::string& ns, const std::string& addr, int count, const std::string& interval) {
  PingResult p;
  // By full path: busybox's nsenter would run its own ping applet first.
  auto r = run_in(ns, {"/usr/bin/ping", "-n", "-c", std::to_string(count), "-i", interval, "-W", "1", addr}, 120s);
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

const nlohmann::json& features() {
  static const nlohmann::json j = [] {
    auto r = run({bin("faultctl"), "features", "--json"});
    auto parsed = nlohmann::json::parse(r.out, nullptr, false);
    if (!parsed.is_object()) {
      std::fprintf(stderr, "faultctl features --json gave no JSON (exit %d): %s\n", r.status.code, r.out.c_str());
      return nlohmann::json::object();
    }
    return parsed;
  }();
  return j;
}

bool probe_available(const std::string& probe) {
  const auto& p = features().value("probes", nlohmann::json::object());
  return p.contains(probe) && p[probe].value("available", false);
}

std::string probe_detail(const std::string& probe) {
  const auto& p = features().value("probes", nlohmann::json::object());
  if (!p.contains(probe)) return "faultctl features has no probe named " + probe;
  return p[probe].value("detail", "");
}

std::string capability_uses(const std::string& capability) {
  for (const auto& c : features().value("capabilities", nlohmann::json::array())) {
    if (c.value("capability", "") == capability) return c["chosen"].is_string() ? c["chosen"].get<std::string>() : "";
  }
  return "";
}

void announce_not_applicable(const std::string& why) {
  const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
  std::printf("vmtest-na: %s.%s: %s\n", t->test_suite_name(), t->name(), why.c_str());
  std::fflush(stdout);
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
