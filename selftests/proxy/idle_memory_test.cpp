// What idle proxied connections cost: the proxy runs alone in a process of its
// own (fl-proxyhost, as it would in faultd), 10k connections are opened through it
// and carry one echo each, then sit idle; its RSS is read before and after. The
// issue's target: 10k idle proxied connections in at most 100 MiB for the whole daemon.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "selftests/lib/child_process.h"
#include "selftests/proxy/proxy_fixture.h"

namespace {

using faultline::ReceiveMode;
using fltest::UniqueFd;

uint64_t rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

// The echo server in a process of its own, so that this one holds only the
// clients' descriptors and 10k connections fit under a 20k descriptor limit.
class EchoProcess {
 public:
  EchoProcess() {
    int down[2], up[2];
    EXPECT_EQ(::pipe2(down, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(up, O_CLOEXEC), 0);
    pid_ = ::fork();  // no other thread runs here: each test joins its own
    if (pid_ == 0) {
      ::close(down[1]);
      ::close(up[0]);
      fltest::raise_fd_limit(1u << 20);
      {
        fltest::EchoServer echo;
        uint16_t port = echo.port();
        if (::write(up[1], &port, sizeof port) != ssize_t(sizeof port)) ::_exit(1);
        char c;
        while (::read(down[0], &c, 1) > 0) {
        }
      }
      ::_exit(0);
    }
    ::close(down[0]);
    ::close(up[1]);
    control_.reset(down[1]);
    UniqueFd from(up[0]);
    EXPECT_EQ(::read(from.get(), &port_, sizeof port_), ssize_t(sizeof port_));
  }
  ~EchoProcess() {
    control_.reset();
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  [[nodiscard]] uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  UniqueFd control_;
};

class IdleMemoryTest : public ::testing::TestWithParam<ReceiveMode> {};

TEST_P(IdleMemoryTest, TenThousandIdleConnections) {
  // Each connection is 2 descriptors in the proxy (whose limit is ours: it cannot
  // go past the hard limit without CAP_SYS_RESOURCE), 1 here and 1 in the echo process.
  uint64_t limit = fltest::raise_fd_limit(2 * 10'000 + 64);
  const size_t n = std::min<uint64_t>(10'000, (limit - 64) / 2);
  if (n < 10'000)
    std::fprintf(stderr, "*** idle memory: a descriptor limit of %llu allows the proxy %zu connections, not 10k ***\n",
                 (unsigned long long)limit, n);
  EchoProcess echo;
  auto child = fltest::ChildProcess::spawn({PROXYHOST_PATH, "127.0.0.1:" + std::to_string(echo.port()),
                                            GetParam() == ReceiveMode::buffer_ring ? "ring" : "plain"},
                                           {.stdin_pipe = true});
  auto line = child.wait_line_starting("listen ", std::chrono::seconds(10));
  ASSERT_TRUE(line) << child.describe();
  uint16_t port = fltest::port_of(*line);
  ::usleep(100'000);
  uint64_t before = rss_kib(child.pid());
  std::vector<UniqueFd> clients;
  clients.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    clients.push_back(fltest::connect_loopback(port));
    ASSERT_TRUE(clients.back()) << "connection " << i << ": " << strerror(errno);
    fltest::send_all(clients.back().get(), "ping");
    ASSERT_EQ(fltest::read_exact(clients.back().get(), 4), "ping") << "connection " << i;
  }
  ::usleep(300'000);
  uint64_t after = rss_kib(child.pid());
  double per_conn = double(after - before) / double(n);
  double projected_mib = (double(before) + per_conn * 10'000) / 1024.0;
  std::printf(
      "idle memory (%s): RSS %.1f MiB before, %.1f MiB with %zu idle connections: %.2f KiB each; 10k -> %.1f MiB\n",
      GetParam() == ReceiveMode::buffer_ring ? "buffer ring" : "plain recv", double(before) / 1024.0,
      double(after) / 1024.0, n, per_conn, projected_mib);
  if (GetParam() == ReceiveMode::buffer_ring) {
    EXPECT_LE(projected_mib, 100.0);
  }
  clients.clear();
  child.close_stdin();
  auto status = child.wait(std::chrono::seconds(10));
  ASSERT_TRUE(status) << "fl-proxyhost did not end when its stdin closed";
  EXPECT_TRUE(status->is(0)) << child.describe();
}

INSTANTIATE_TEST_SUITE_P(ReceivePaths, IdleMemoryTest, ::testing::Values(ReceiveMode::buffer_ring, ReceiveMode::plain),
                         [](const auto& info) {
                           return std::string(info.param == ReceiveMode::buffer_ring ? "BufferRing" : "Plain");
                         });

}  // namespace
