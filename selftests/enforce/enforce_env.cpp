// Child processes, namespaces, cgroups and loopback peers for the enforcement tests.
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

namespace flenf {
namespace {

std::set<pid_t>& faultctl_pids() {
  static std::set<pid_t> pids;
  return pids;
}

uint64_t mono_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1'000'000;
}

Exit decode(int status) {
  Exit e;
  if (WIFEXITED(status)) {
    e.exited = true;
    e.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    e.sig = WTERMSIG(status);
  }
  return e;
}

}  // namespace

std::string Exit::str() const {
  return exited ? "exit " + std::to_string(code) : sig ? "killed by signal " + std::to_string(sig) : "not ended";
}

Child Child::spawn(const std::vector<std::string>& argv, const SpawnOptions& o) {
  int out[2], err[2], in[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  if (o.stdin_pipe && ::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  // Prepared before fork: the child only makes async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string procs = o.cgroup.empty() ? "" : o.cgroup + "/cgroup.procs";
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (!procs.empty()) {
      int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) _exit(126);
      ::close(fd);
    }
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    if (in[0] >= 0) {
      ::dup2(in[0], STDIN_FILENO);
    } else {
      int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, STDIN_FILENO);
    }
    ::execvp(args[0], args.data());
    _exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  if (in[0] >= 0) ::close(in[0]);
  if (argv[0] == kFaultctl) faultctl_pids().insert(pid);
  Child c;
  c.pid_ = pid;
  c.out_fd_ = out[0];
  c.err_fd_ = err[0];
  c.in_fd_ = in[1];
  for (const auto& a : argv) c.cmdline_ += (c.cmdline_.empty() ? "" : " ") + a;
  return c;
}

Child::Child(Child&& o) noexcept
    : pid_(o.pid_), out_fd_(o.out_fd_), err_fd_(o.err_fd_), in_fd_(o.in_fd_), cmdline_(std::move(o.cmdline_)),
      out_(std::move(o.out_)), err_(std::move(o.err_)), exit_(o.exit_) {
  o.pid_ = -1;
  o.out_fd_ = o.err_fd_ = o.in_fd_ = -1;
}

Child::~Child() {
  stop();
  for (int fd : {out_fd_, err_fd_, in_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void Child::pump(int timeout_ms) {
  pollfd p[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  int n = ::poll(p, 2, timeout_ms);
  if (n <= 0) return;
  char buf[8192];
  for (int i = 0; i < 2; ++i) {
    if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t r = ::read(p[i].fd, buf, sizeof(buf));
    if (r > 0) {
      (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(r));
    } else {
      ::close(p[i].fd);
      (i == 0 ? out_fd_ : err_fd_) = -1;
    }
  }
}

bool Child::wait_for(const std::string& needle, Millis timeout, bool from_err) {
  const uint64_t end = mono_ms() + static_cast<uint64_t>(timeout.count());
  for (;;) {
    if ((from_err ? err_ : out_).find(needle) != std::string::npos) return true;
    if (out_fd_ < 0 && err_fd_ < 0) return false;
    uint64_t now = mono_ms();
    if (now >= end) return false;
    pump(static_cast<int>(std::min<uint64_t>(end - now, 100)));
  }
}

bool Child::wait_for_either(const std::string& needle, Millis timeout) {
  const uint64_t end = mono_ms() + static_cast<uint64_t>(timeout.count());
  for (;;) {
    if (out_.find(needle) != std::string::npos || err_.find(needle) != std::string::npos) return true;
    if (out_fd_ < 0 && err_fd_ < 0) return false;
    uint64_t now = mono_ms();
    if (now >= end) return false;
    pump(static_cast<int>(std::min<uint64_t>(end - now, 100)));
  }
}

void Child::write_stdin(const std::string& s) {
  if (in_fd_ >= 0) (void)!::write(in_fd_, s.data(), s.size());
}

void Child::close_stdin() {
  if (in_fd_ >= 0) ::close(in_fd_);
  in_fd_ = -1;
}

std::optional<Exit> Child::wait(Millis timeout) {
  if (exit_) return exit_;
  if (pid_ < 0) return std::nullopt;
  const uint64_t end = mono_ms() + static_cast<uint64_t>(timeout.count());
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_ = decode(status);
      // Drain what is left in the pipes (grandchildren may still hold them: bounded).
      const uint64_t drain_end = mono_ms() + 2000;
      while ((out_fd_ >= 0 || err_fd_ >= 0) && mono_ms() < drain_end) pump(50);
      return exit_;
    }
    if (mono_ms() >= end) return std::nullopt;
    if (out_fd_ >= 0 || err_fd_ >= 0) pump(20);
    else ::usleep(20'000);
  }
}

void Child::stop() {
  if (pid_ < 0 || exit_) return;
  close_stdin();
  ::kill(pid_, SIGTERM);  // faultctl forwards it to its command and cleans up
  if (wait(3000ms)) return;
  ::kill(pid_, SIGKILL);
  (void)wait(3000ms);
}

std::string Child::describe() const {
  return "`" + cmdline_ + "` (" + (exit_ ? exit_->str() : "running") + ")\n--- stdout:\n" + out_ + "--- stderr:\n" + err_;
}

std::string Outcome::describe() const {
  return "`" + cmdline + "` (" + exit.str() + ")\n--- stdout:\n" + out + "--- stderr:\n" + err;
}

Outcome run(const std::vector<std::string>& argv, Millis timeout, const SpawnOptions& o) {
  Child c = Child::spawn(argv, o);
  Outcome r;
  auto e = c.wait(timeout);
  if (!e) {
    ::kill(c.pid(), SIGKILL);
    e = c.wait(5000ms);
  }
  r.exit = e.value_or(Exit{});
  r.out = c.out();
  r.err = c.err();
  for (const auto& a : argv) r.cmdline += (r.cmdline.empty() ? "" : " ") + a;
  return r;
}

std::string unique_name(const std::string& tag) {
  static std::atomic<int> n{0};
  return "flenf" + std::to_string(::getpid() % 100000) + "x" + std::to_string(n++) + tag;
}

void ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  Outcome r = run(argv, 15s);
  if (!r.exit.is(0)) throw std::runtime_error("ip failed: " + r.describe());
}

Netns::Netns(const std::string& tag, bool local_ranges) : name_(unique_name(tag)) {
  ip({"netns", "add", name_});
  try {
    ip({"-n", name_, "link", "set", "lo", "up"});
    if (local_ranges) {
      ip({"-n", name_, "route", "add", "local", "198.18.0.0/15", "dev", "lo"});
      ip({"-n", name_, "-6", "route", "add", "local", "2001:2::/48", "dev", "lo"});
    }
  } catch (...) {
    (void)run({"ip", "netns", "del", name_});
    throw;
  }
}

Netns::~Netns() { (void)run({"ip", "netns", "del", name_}); }

uint32_t Netns::inode() const {
  struct stat st {};
  if (::stat(("/run/netns/" + name_).c_str(), &st) != 0) return 0;
  return static_cast<uint32_t>(st.st_ino);
}

VethPair::VethPair(const Netns& a, const Netns& b, int subnet) : ns_a_(a.name()), subnet_(subnet) {
  std::string base = "fle" + std::to_string(::getpid() % 100000) + "s" + std::to_string(subnet);
  dev_a_ = base + "a";
  std::string dev_b = base + "b";
  ip({"link", "add", dev_a_, "netns", a.name(), "type", "veth", "peer", "name", dev_b, "netns", b.name()});
  ip({"-n", a.name(), "addr", "add", addr_a() + "/24", "dev", dev_a_});
  ip({"-n", b.name(), "addr", "add", addr_b() + "/24", "dev", dev_b});
  ip({"-n", a.name(), "link", "set", dev_a_, "up"});
  ip({"-n", b.name(), "link", "set", dev_b, "up"});
}

VethPair::~VethPair() { (void)run({"ip", "-n", ns_a_, "link", "del", dev_a_}); }

const std::string& cgroup2_mount() {
  static const std::string mount = [] {
    std::ifstream in("/proc/mounts");
    std::string dev, dir, type, rest;
    while (in >> dev >> dir >> type && std::getline(in, rest)) {
      if (type == "cgroup2") return dir;
    }
    return std::string();
  }();
  return mount;
}

Cgroup::Cgroup(const std::string& tag) {
  if (cgroup2_mount().empty()) throw std::runtime_error("no cgroup v2 mount");
  path_ = cgroup2_mount() + "/" + unique_name(tag);
  if (::mkdir(path_.c_str(), 0755) != 0) throw std::runtime_error("mkdir " + path_ + ": " + strerror(errno));
}

Cgroup::~Cgroup() { remove_cgroup(path_); }

std::string Cgroup::relative() const { return path_.substr(cgroup2_mount().size()); }

std::vector<pid_t> Cgroup::procs() const {
  std::ifstream in(path_ + "/cgroup.procs");
  std::vector<pid_t> v;
  for (pid_t p; in >> p;) v.push_back(p);
  return v;
}

void remove_cgroup(const std::string& path) {
  for (int i = 0; i < 100; ++i) {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return;
    std::ifstream in(path + "/cgroup.procs");
    for (pid_t p; in >> p;) ::kill(p, SIGKILL);
    ::usleep(20'000);
  }
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
  FLENF_REQUIRE_ROOT();
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
  std::filesystem::remove_all(bpffs_root_, ec);
  ::unlink(faultline::state_lock_path({bpffs_root_}).c_str());
  ::unsetenv("FAULTLINE_RUN_DIR");
  ::unsetenv("FAULTLINE_BPFFS_ROOT");
}

}  // namespace flenf
