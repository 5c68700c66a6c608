// The proxy on the second kernel (6.1): its io_uring paths as that kernel's
// probe decides them, both receive paths relaying real bytes, a latency toxic
// measured, and a transparent interception (faultctl guard --redirect to the
// proxy, the original destination learned from the kernel) on that verifier.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/unique_fd.h"
#include "userspace/enforce/redirected_conns.h"
#include "userspace/net/address.h"
#include "userspace/proxy/proxy_registry.h"
#include "vm_util.h"

namespace flvm {
namespace {

using faultline::ProxyRegistry;
using faultline::UniqueFd;

// One ping through "127.0.0.1:PORT": sends "ping", reads the reply; the
// milliseconds it took, or -1.
double timed_ping(const std::string& addr, std::string* reply) {
  const uint16_t port = static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
  UniqueFd s(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const auto t0 = std::chrono::steady_clock::now();
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) return -1;
  if (::send(s.get(), "ping", 4, MSG_NOSIGNAL) != 4) return -1;
  char b[64] = {};
  ssize_t n = ::recv(s.get(), b, sizeof(b) - 1, 0);
  if (n <= 0) return -1;
  *reply = std::string(b, static_cast<size_t>(n));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

class VmProxy : public ::testing::TestWithParam<faultline::ReceiveMode> {};

TEST_P(VmProxy, RelaysAndDelaysOnThisKernel) {
  ChildProcess echo = start({bin("fl-vmprobe"), "echo", "tcp", "18090"});
  ASSERT_TRUE(echo.wait_for("ready", 10s)) << echo.out();
  faultline::ProxyOptions o;
  o.workers = 1;
  o.receive = GetParam();
  auto reg = ProxyRegistry::start(o);
  ASSERT_TRUE(reg) << reg.error().describe();
  const auto paths = (*reg)->io_paths();
  std::printf("[ paths    ] buffer ring %d, multishot accept %d, workers %u\n", paths.buffer_ring,
              paths.multishot_accept, paths.workers);
  auto p = (*reg)->create({"echo", "127.0.0.1:0", "127.0.0.1:18090", true});
  ASSERT_TRUE(p) << p.error().describe();
  std::string reply;
  ASSERT_GE(timed_ping(p->listen_bound, &reply), 0);
  EXPECT_EQ(reply, "pong ping");

  faultline::Toxic t;
  t.name = "latency_downstream";
  t.attributes = faultline::LatencyToxic{200, 0};
  auto added = (*reg)->add_toxic("echo", t);
  ASSERT_TRUE(added) << added.error().describe();
  const double ms = timed_ping(p->listen_bound, &reply);
  EXPECT_EQ(reply, "pong ping");
  EXPECT_GE(ms, 195) << "200 ms of downstream latency";
  EXPECT_LE(ms, 200 * 1.05 + 50) << "200 ms of downstream latency (under emulation)";
}

INSTANTIATE_TEST_SUITE_P(Receive, VmProxy,
                         ::testing::Values(faultline::ReceiveMode::automatic, faultline::ReceiveMode::plain),
                         [](const auto& info) {
                           return std::string(info.param == faultline::ReceiveMode::plain ? "plain" : "automatic");
                         });

// faultctl guard --redirect sends a client's connect for 192.0.2.10:80 (no route
// in the guest) to a listener of this process, which learns the original
// destination from the kernel map the guard's sockops program filled.
TEST(VmRedirectHandoff, TheListenerLearnsTheOriginalDestination) {
  UniqueFd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(l.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(18091);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin)), 0);
  ASSERT_EQ(::listen(l.get(), 4), 0);
  std::string seen;
  std::thread acceptor([&] {
    pollfd pf{l.get(), POLLIN, 0};
    if (::poll(&pf, 1, 30000) != 1) return;
    UniqueFd c(::accept(l.get(), nullptr, nullptr));
    auto got = faultline::find_redirected_conn(c.get());
    seen = !got   ? "error: " + got.error().describe()
           : *got ? faultline::endpoint_text((*got)->orig, (*got)->orig_port)
                  : "(none)";
    char b[16];
    (void)!::recv(c.get(), b, sizeof(b), 0);
    (void)!::send(c.get(), "pong ping", 9, MSG_NOSIGNAL);
  });
  auto r = run({bin("faultctl"), "guard", "--redirect", "192.0.2.10:80=127.0.0.1:18091", "--", bin("fl-vmprobe"),
                "peer", "tcp", "192.0.2.10", "80"});
  acceptor.join();
  EXPECT_EQ(r.status.code, 0) << r.out;
  EXPECT_NE(r.out.find("peer 192.0.2.10:80 reply pong ping"), std::string::npos) << r.out;
  EXPECT_EQ(seen, "192.0.2.10:80");
}

// faultctl run tcp on this kernel: a command's connect is redirected to
// faultctl's proxy, which connects to the original destination and cuts the
// reply after 4 bytes (limit_data); host-wide, the proxy's own connect carries
// FL_PROXY_MARK and is not redirected back to it (the mark read on this
// verifier), and reset_peer resets the client.
TEST(VmRunTcp, InterceptsACommandAndTheHost) {
  ChildProcess echo = start({bin("fl-vmprobe"), "echo", "tcp", "18092"});
  ASSERT_TRUE(echo.wait_for("ready", 10s)) << echo.out();
  auto cmd = run({bin("faultctl"), "run", "tcp", "--target", "127.0.0.1:18092", "--toxic", "limit_data=4", "--duration",
                  "30s", "--", bin("fl-vmprobe"), "peer", "tcp", "127.0.0.1", "18092"});
  EXPECT_EQ(cmd.status.code, 0) << cmd.out << cmd.err;
  EXPECT_NE(cmd.out.find("peer 127.0.0.1:18092 reply pong\n"), std::string::npos) << cmd.out << cmd.err;

  // The reply is held (timeout=0) until the reset 300 ms in, so the client is
  // waiting in recv() when it comes: ECONNRESET there, not a race with its send.
  ChildProcess fault = start({bin("faultctl"), "run", "tcp", "--target", "127.0.0.1:18092", "--toxic", "timeout=0",
                              "--toxic", "reset_peer=300ms", "--duration", "60s"});
  ASSERT_TRUE(fault.wait_for("tcp fault t", 20s)) << fault.out();
  auto reset = run({bin("fl-vmprobe"), "peer", "tcp", "127.0.0.1", "18092"});
  EXPECT_NE(reset.out.find("error ECONNRESET"), std::string::npos) << reset.out;
  auto ab = run({bin("faultctl"), "abort", "--all"});
  EXPECT_EQ(ab.status.code, 0) << ab.out << ab.err;
  auto after = run({bin("fl-vmprobe"), "peer", "tcp", "127.0.0.1", "18092"});
  EXPECT_NE(after.out.find("peer 127.0.0.1:18092 reply pong ping"), std::string::npos) << after.out;
}

}  // namespace
}  // namespace flvm
