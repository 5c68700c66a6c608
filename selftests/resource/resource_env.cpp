// Test fixtures for resource faults: processes, tmpfs, cgroup, HTTP service, faultctl runs.
#include "resource_env.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "selftests/lib/require_root.h"
#include "selftests/lib/test_bpffs.h"

extern char** environ;

namespace flres {

void sleep_for(Millis d) { std::this_thread::sleep_for(d); }

bool eventually(const std::function<bool()>& pred, Millis timeout, Millis step) {
  auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    sleep_for(step);
  }
}

bool path_exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

std::string read_file(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool pid_alive(pid_t pid) {
  std::string s = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] != 'Z' && s[close + 2] != 'X';
}

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) out.push_back(j);
  }
  return out;
}

CpuTimes cpu_times(int cpu) {
  std::istringstream in(read_file("/proc/stat"));
  std::string want = "cpu" + std::to_string(cpu);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string name;
    ls >> name;
    if (name != want) continue;
    std::vector<uint64_t> v;
    for (uint64_t x; ls >> x;) v.push_back(x);
    CpuTimes t;
    for (size_t i = 0; i < v.size() && i < 8; ++i) t.total += v[i];  // guest time is already in user
    uint64_t idle = v.size() > 4 ? v[3] + v[4] : 0;                  // idle + iowait
    t.busy = t.total - idle;
    return t;
  }
  return {};
}

std::optional<nlohmann::json> wait_event(ChildProcess& faultctl, const std::string& event, Millis timeout) {
  std::optional<nlohmann::json> found;
  (void)eventually(
      [&] {
        for (const auto& j : json_lines(faultctl.out())) {
          if (j.value("event", "") == event) {
            found = j;
            return true;
          }
        }
        return !faultctl.running();  // ended without it: stop waiting
      },
      timeout);
  if (!found) {  // what it printed last, as it ended
    for (const auto& j : json_lines(faultctl.out())) {
      if (j.value("event", "") == event) return j;
    }
  }
  return found;
}

Counter::Counter(const std::string& comm) {
  void* p = ::mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap");
  counter_ = static_cast<volatile uint64_t*>(p);
  *counter_ = 0;
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(0);
    if (!comm.empty()) ::prctl(PR_SET_NAME, comm.c_str());
    signal(SIGTERM, SIG_DFL);
    for (;;) {
      *counter_ = *counter_ + 1;
      ::usleep(2000);
    }
  }
}

Counter::~Counter() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ::munmap(const_cast<uint64_t*>(counter_), sizeof(uint64_t));
}

uint64_t Counter::value() const { return *counter_; }

char Counter::state() const {
  std::string s = read_file("/proc/" + std::to_string(pid_) + "/stat");
  auto close = s.rfind(')');
  return close == std::string::npos || close + 2 >= s.size() ? '?' : s[close + 2];
}

std::optional<int> Counter::ended_by_signal() {
  if (reaped_) return std::nullopt;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  reaped_ = true;
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

Tmpfs::Tmpfs(const std::string& path, const std::string& size) : path_(path) {
  ::mkdir(path_.c_str(), 0755);
  std::string opts = "size=" + size + ",mode=0755";
  if (::mount("tmpfs", path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
    throw std::runtime_error("mount tmpfs on " + path_ + ": " + std::strerror(errno));
  mounted_ = true;
}

Tmpfs::~Tmpfs() {
  if (mounted_ && ::umount2(path_.c_str(), 0) != 0) {
    ADD_FAILURE() << "tmpfs " << path_ << " is still busy at the end (" << std::strerror(errno)
                  << "): something holds it";
    ::umount2(path_.c_str(), MNT_DETACH);
  }
  ::rmdir(path_.c_str());
}

double Tmpfs::use_percent() const {
  struct statvfs v {};
  if (::statvfs(path_.c_str(), &v) != 0) return -1;
  double used = static_cast<double>(v.f_blocks - v.f_bfree), avail = static_cast<double>(v.f_bavail);
  return used + avail == 0 ? 100 : 100.0 * used / (used + avail);
}

std::vector<std::string> Tmpfs::files() const {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename());
  return out;
}

HttpServer::HttpServer(std::function<Reply()> decide, const std::string& addr, const std::string& netns_path)
    : addr_(addr), decide_(std::move(decide)) {
  // A socket belongs to the namespace it was made in: enter for the socket() call only.
  int home = -1;
  if (!netns_path.empty()) {
    home = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int ns = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (home < 0 || ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) throw std::runtime_error("cannot enter " + netns_path);
    ::close(ns);
  }
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (home >= 0) {
    ::setns(home, CLONE_NEWNET);
    ::close(home);
  }
  int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd_, 16) != 0)
    throw std::runtime_error("cannot listen on " + addr);
  socklen_t len = sizeof(a);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { serve(); });
}

HttpServer::~HttpServer() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

std::string HttpServer::url() const { return "http://" + addr_ + ":" + std::to_string(port_) + "/health"; }

void HttpServer::serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) != 1) continue;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::string req;
    char buf[1024];
    while (req.find("\r\n\r\n") == std::string::npos) {
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 1000) != 1) break;
      ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    Reply r = decide_();
    ++requests_;
    for (int waited = 0; waited < r.delay_ms && !stop_; waited += 10) sleep_for(10ms);
    std::string body = r.status < 400 ? "ok\n" : "unavailable\n";
    std::string resp = "HTTP/1.1 " + std::to_string(r.status) + (r.status < 400 ? " OK" : " Service Unavailable") +
                       "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    (void)!::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
    ::close(c);
  }
}

void ResourceTest::SetUp() {
  FL_REQUIRE_ROOT("tmpfs mounts, cgroups and signals to other processes");
  static int n = 0;
  dir_ = "/tmp/fl-res-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  ::chmod(dir_.c_str(), 0700);
  bpffs_root_ = "/sys/fs/bpf/fl-res-" + std::to_string(::getpid()) + "-" + std::to_string(n);
  env_ = {"FAULTLINE_RUN_DIR=" + dir_ + "/run", "FAULTLINE_REAPER_GRACE=2s", "FAULTLINE_BPFFS_ROOT=" + bpffs_root_};
}

void ResourceTest::TearDown() {
  if (dir_.empty()) return;
  auto left = state_files();
  EXPECT_TRUE(left.empty()) << "the test left " << left.size() << " resource fault(s) in the state folder";
  for (const auto& f : left) {  // whatever a failed test left, reverted
    CommandResult a = run({"abort", f.substr(0, f.size() - 5)}, 30s);
    EXPECT_EQ(a.status.code, 0) << a.describe();
  }
  EXPECT_TRUE(state_files().empty()) << "faultctl abort left state behind";
  // A reaper finishing its revert may unlink its lock file while we walk the
  // folder; remove_all then fails with ENOENT. Retry until the folder is gone.
  std::error_code ec;
  for (int i = 0; i < 40 && std::filesystem::exists(dir_); ++i) {
    std::filesystem::remove_all(dir_, ec);
    if (std::filesystem::exists(dir_)) ::usleep(50'000);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_)) << "cannot remove " << dir_ << ": " << ec.message();
  fltest::remove_test_bpffs_root(bpffs_root_);
}

CommandResult ResourceTest::run(const std::vector<std::string>& args, Millis timeout) {
  auto f = start(args);
  if (!f->wait(timeout))
    ADD_FAILURE() << "faultctl did not finish within " << timeout.count() << "ms: " << f->describe();
  return f->finish(0ms);  // SIGKILL if it still runs
}

std::unique_ptr<ChildProcess> ResourceTest::start(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {FAULTCTL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  // A process group of its own, like a command started from a shell: a signal to
  // the test's group does not reach it.
  return std::make_unique<ChildProcess>(
      ChildProcess::spawn(argv, {.env = env_, .output = fltest::Output::kFiles, .own_process_group = true}));
}

std::vector<std::string> ResourceTest::state_files() const {
  std::vector<std::string> out;
  std::string faults = dir_ + "/run/faults";
  if (!path_exists(faults)) return out;
  for (const auto& e : std::filesystem::directory_iterator(faults)) {
    std::string n = e.path().filename();
    if (n[0] == 'r' && n.ends_with(".json")) out.push_back(n);
  }
  return out;
}

std::string ResourceTest::unique(const std::string& what) const {
  return "fl-" + what + "-" + std::to_string(::getpid()) + "-" + dir_.substr(dir_.rfind('-') + 1);
}

}  // namespace flres
