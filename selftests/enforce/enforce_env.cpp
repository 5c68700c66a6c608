// faultctl children, unique names, fl_probe results and loopback peers for the enforcement tests.
#include "enforce_env.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "loader/bpffs.h"
#include "selftests/lib/require_root.h"
#include "selftests/lib/test_bpffs.h"

namespace flenf {
namespace {

std::set<pid_t>& faultctl_pids() {
  static std::set<pid_t> pids;
  return pids;
}

}  // namespace

ChildProcess spawn(const std::vector<std::string>& argv, SpawnOptions o) {
  if (o.stop_grace == 0ms) o.stop_grace = 3000ms;
  ChildProcess c = ChildProcess::spawn(argv, o);
  if (argv[0] == kFaultctl) faultctl_pids().insert(c.pid());
  return c;
}

CommandResult run(const std::vector<std::string>& argv, Millis timeout, SpawnOptions o) {
  return spawn(argv, std::move(o)).finish(timeout);
}

std::string unique_name(const std::string& tag) {
  static std::atomic<int> n{0};
  return "flenf" + std::to_string(::getpid() % 100000) + "x" + std::to_string(n++) + tag;
}

std::string veth_addr(int subnet, char side) {
  return "198.18." + std::to_string(subnet) + (side == 'a' ? ".1" : ".2");
}

VethEnd veth_end(int subnet, char side) {
  return VethEnd{"fle" + std::to_string(::getpid() % 100000) + "s" + std::to_string(subnet) + side,
                 {veth_addr(subnet, side) + "/24"}};
}

std::set<std::string> leftover_faultctl_cgroups() {
  std::set<std::string> left;
  DIR* d = ::opendir(cgroup2_mount().c_str());
  if (d == nullptr) return left;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("faultline-", 0) != 0) continue;
    auto dash = n.rfind('-');
    pid_t pid = static_cast<pid_t>(std::atoi(n.c_str() + dash + 1));
    if (faultctl_pids().count(pid)) left.insert(cgroup2_mount() + "/" + n);
  }
  ::closedir(d);
  return left;
}

void forget_faultctl_pids() { faultctl_pids().clear(); }

std::map<std::string, Counts> results(const std::string& out) {
  std::map<std::string, Counts> r;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    std::istringstream ls(line.substr(7));
    std::string kind, target, tok;
    ls >> kind >> target;
    Counts& c = r[kind + " " + target];
    while (ls >> tok) {
      auto colon = tok.rfind(':');
      if (colon != std::string::npos) c[tok.substr(0, colon)] += std::atol(tok.c_str() + colon + 1);
    }
  }
  return r;
}

std::vector<std::map<std::string, Counts>> phases(const std::string& out) {
  std::vector<std::map<std::string, Counts>> v;
  size_t from = 0;
  for (;;) {
    size_t at = out.find("WAITING\n", from);
    v.push_back(results(out.substr(from, at == std::string::npos ? std::string::npos : at - from)));
    if (at == std::string::npos) return v;
    from = at + 8;
  }
}

bool wait_lines(ChildProcess& c, const std::string& line, int n) {
  for (int i = 0; i < 200; ++i) {
    size_t count = 0, at = 0;
    while ((at = c.out().find(line, at)) != std::string::npos) ++count, at += line.size();
    if (static_cast<int>(count) >= n) return true;
    (void)c.wait_for("\x01", 50ms);  // never printed: reads output for 50 ms
  }
  return false;
}

std::string show(const Counts& c) {
  std::string s;
  for (const auto& [k, v] : c) s += (s.empty() ? "" : " ") + k + ":" + std::to_string(v);
  return s.empty() ? "(nothing)" : s;
}

long count_of(const Counts& c, const std::string& key) {
  auto it = c.find(key);
  return it == c.end() ? 0 : it->second;
}

// ---- loopback peers -------------------------------------------------------

namespace {

uint16_t bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

struct UdpReceiver::State {
  int fd = -1;
  std::atomic<bool> stop{false};
  std::atomic<long> datagrams{0}, bytes{0};
  std::thread th;
};

UdpReceiver::UdpReceiver() : s_(new State) {
  s_->fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int big = 8 << 20;
  ::setsockopt(s_->fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s_->fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) throw std::runtime_error("udp bind");
  port_ = bound_port(s_->fd);
  s_->th = std::thread([s = s_] {
    char buf[65536];
    while (!s->stop.load()) {
      pollfd p{s->fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ssize_t n = ::recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n >= 0) {
        s->datagrams++;
        s->bytes += n;
      }
    }
  });
}

UdpReceiver::~UdpReceiver() {
  s_->stop = true;
  s_->th.join();
  ::close(s_->fd);
  delete s_;
}

long UdpReceiver::datagrams() const { return s_->datagrams.load(); }
long UdpReceiver::bytes() const { return s_->bytes.load(); }

struct TcpServer::State {
  int fd = -1;
  std::atomic<bool> stop{false};
  std::atomic<long> accepted{0};
  std::thread th;
};

TcpServer::TcpServer(bool v6, bool http) : s_(new State) {
  s_->fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(s_->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    rc = ::bind(s_->fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::bind(s_->fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0 || ::listen(s_->fd, 4096) != 0) throw std::runtime_error("tcp listen");
  port_ = bound_port(s_->fd);
  s_->th = std::thread([s = s_, http] {
    while (!s->stop.load()) {
      pollfd p{s->fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept4(s->fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) continue;
      s->accepted++;
      pollfd q{c, POLLIN, 0};
      if (http && ::poll(&q, 1, 2000) > 0) {
        char buf[4096];
        if (::recv(c, buf, sizeof(buf), 0) > 0) {
          static const char kReply[] = "HTTP/1.0 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nhello\n";
          (void)!::send(c, kReply, sizeof(kReply) - 1, MSG_NOSIGNAL);
        }
      }
      ::close(c);
    }
  });
}

TcpServer::~TcpServer() {
  s_->stop = true;
  s_->th.join();
  ::close(s_->fd);
  delete s_;
}

long TcpServer::accepted() const { return s_->accepted.load(); }

// ---- fixture ---------------------------------------------------------------

void EnforceTest::SetUp() {
  FL_REQUIRE_ROOT("cgroups, BPF programs and network namespaces");
  if (cgroup2_mount().empty()) GTEST_SKIP() << "no cgroup v2 mount";
  forget_faultctl_pids();
  state_dir_ = "/tmp/" + unique_name("state");
  std::filesystem::create_directories(state_dir_);
  ::chmod(state_dir_.c_str(), 0700);
  bpffs_root_ = "/sys/fs/bpf/" + unique_name("bpf");
  ::setenv("FAULTLINE_RUN_DIR", (state_dir_ + "/run").c_str(), 1);
  ::setenv("FAULTLINE_BPFFS_ROOT", bpffs_root_.c_str(), 1);
}

void EnforceTest::TearDown() {
  auto left = leftover_faultctl_cgroups();
  for (const auto& p : left) {
    ADD_FAILURE() << "faultctl left its cgroup behind: " << p;
    remove_cgroup(p);
  }
  if (state_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(state_dir_, ec);
  fltest::remove_test_bpffs_root(bpffs_root_);
  ::unsetenv("FAULTLINE_RUN_DIR");
  ::unsetenv("FAULTLINE_BPFFS_ROOT");
}

void PolicyFileTest::TearDown() {
  // Every path removes the applied policy, before the fixture drops the pins.
  if (!bpffs_root_.empty()) (void)run({kFaultctl, "policy", "delete"});
  for (const auto& f : files_) ::unlink(f.c_str());
  EnforceTest::TearDown();
}

std::string PolicyFileTest::file(const std::string& text) {
  const std::string path = "/tmp/" + unique_name("pol") + ".yaml";
  std::ofstream(path) << text;
  files_.push_back(path);
  return path;
}

}  // namespace flenf
