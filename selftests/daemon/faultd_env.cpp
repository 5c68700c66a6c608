// The daemon fixture: private state for every test, faultd as a child process.
#include "faultd_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>

#include "selftests/lib/require_root.h"
#include "selftests/lib/test_bpffs.h"

namespace fldaemon {

void FaultdTest::SetUp() {
  FL_REQUIRE_ROOT("faultd serves root only and reads pinned BPF state");
  ASSERT_EQ(::access(FAULTD_PATH, X_OK), 0) << "faultd not built at " << FAULTD_PATH;
  char tmpl[] = "/tmp/fl-faultd-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  dir_ = tmpl;
  run_dir_ = dir_ + "/run";
  socket_ = dir_ + "/faultd.sock";
  bpffs_root_ = "/sys/fs/bpf/fltest-faultd-" + std::to_string(::getpid());
}

void FaultdTest::TearDown() {
  if (dir_.empty()) return;
  if (faultd_) faultd_->stop(3000ms);
  faultd_.reset();
  // Whatever a test left in its private root: the kill switch, then uninstall.
  if (std::filesystem::exists(bpffs_root_)) {
    (void)fltest::run_command({FAULTCTL_PATH, "uninstall"}, {.env = standalone_env()}, 30s);
  }
  fltest::remove_test_bpffs_root(bpffs_root_);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> FaultdTest::env() const {
  return {"FAULTLINE_BPFFS_ROOT=" + bpffs_root_, "FAULTLINE_RUN_DIR=" + run_dir_, "FAULTLINE_FAULTD_SOCKET=" + socket_};
}

std::vector<std::string> FaultdTest::standalone_env() const {
  return {"FAULTLINE_BPFFS_ROOT=" + bpffs_root_, "FAULTLINE_RUN_DIR=" + run_dir_,
          "FAULTLINE_FAULTD_SOCKET=" + dir_ + "/nobody-serves.sock"};
}

void FaultdTest::start_faultd(const std::vector<std::string>& extra, fltest::Output output) {
  start_faultd_in("", extra, output);
}

void FaultdTest::start_faultd_in(const std::string& netns, const std::vector<std::string>& extra,
                                 fltest::Output output) {
  std::vector<std::string> argv;
  // nsenter, not `ip netns exec`: that one also remounts /sys, and with it the
  // bpffs faultd pins its state in.
  if (!netns.empty()) argv = {"nsenter", "--net=/run/netns/" + netns, "--"};
  for (const std::string& w : {std::string(FAULTD_PATH), std::string("--foreground"), std::string("--socket"), socket_,
                               std::string("--metrics"), std::string("127.0.0.1:0"), std::string("--toxiproxy"),
                               std::string("127.0.0.1:0"), std::string("--proxy-workers"), std::string("1")})
    argv.push_back(w);
  argv.insert(argv.end(), extra.begin(), extra.end());
  faultd_.emplace(ChildProcess::spawn(argv, {.env = env(), .output = output, .stop_grace = 3000ms}));
  ASSERT_TRUE(wait_serving(*faultd_)) << faultd_->describe();
  const std::string& err = faultd_->err();
  const size_t at = err.find("metrics on http://127.0.0.1:");
  if (at != std::string::npos) metrics_port_ = static_cast<uint16_t>(std::stoul(err.substr(at + 28)));
  const size_t tp = err.find("Toxiproxy API on http://127.0.0.1:");
  if (tp != std::string::npos) toxiproxy_port_ = static_cast<uint16_t>(std::stoul(err.substr(tp + 34)));
}

TcpReply http(uint16_t port, const std::string& method, const std::string& path, const std::string& body,
              const std::string& extra_headers) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  TcpReply r;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return r;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers;
  if (!body.empty() || method == "POST" || method == "PATCH")
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  (void)!::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  r.status = status_of(raw);
  r.body = body_of(raw);
  return r;
}

bool wait_serving(ChildProcess& d) {
  if (!d.wait_for("faultd: serving", 15s, fltest::Stream::kStderr)) return false;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (d.err().find('\n', d.err().find("faultd: serving")) == std::string::npos) {
    if (std::chrono::steady_clock::now() > until) return false;
    (void)d.wait_for("\x01never", 20ms, fltest::Stream::kStderr);  // reads what came
  }
  return true;
}

size_t FaultdTest::served(const std::string& what, size_t at_least) {
  const auto count = [&] {
    const std::string& err = faultd_->err();
    size_t n = 0;
    for (size_t at = err.find("faultd: " + what + " "); at != std::string::npos;
         at = err.find("faultd: " + what + " ", at + 1))
      ++n;
    return n;
  };
  // faultd's log has a thread of its own: a request's line may come just
  // after its answer. Read what it logged so far, and wait for at_least.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  size_t n = 0;
  do {
    (void)faultd_->wait_for("\x01never", 50ms, fltest::Stream::kStderr);
    n = count();
  } while (n < at_least && std::chrono::steady_clock::now() < deadline);
  return n;
}

CommandResult FaultdTest::faultctl(const std::vector<std::string>& args, bool through_faultd) const {
  std::vector<std::string> argv = {FAULTCTL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return fltest::run_command(argv, {.env = through_faultd ? env() : standalone_env()}, 30s);
}

std::string FaultdTest::raw_exchange(const std::string& bytes) const {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_.c_str(), sizeof addr.sun_path - 1);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

FaultdTest::Reply FaultdTest::request(const std::string& method, const std::string& target) const {
  const std::string raw = raw_exchange(method + " " + target +
                                       " HTTP/1.1\r\nHost: faultd\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  return Reply{status_of(raw), body_of(raw)};
}

int status_of(const std::string& raw) {
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || raw.size() < 12) return 0;
  return std::stoi(raw.substr(9, 3));
}

std::string body_of(const std::string& raw) {
  const size_t end = raw.find("\r\n\r\n");
  return end == std::string::npos ? "" : raw.substr(end + 4);
}

}  // namespace fldaemon
