// faultctl guard --redirect on each kernel of the matrix: the sockaddr object, with
// its getpeername and recvmsg programs and socket-local storage, passes that
// verifier, and a guarded client sent to a documentation address (no route in a
// guest, which has no network device but lo; nobody answering on a host) lands on
// a local listener and sees the address it asked for. The same client outside the
// guard is not redirected: it gets an error (ENETUNREACH in a guest; on a host with
// a default route EHOSTUNREACH or, for UDP, no reply) and never the reply.
#include <gtest/gtest.h>

#include "vm_util.h"

namespace flvm {
namespace {

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

TEST(Redirect, TcpConnectReachesTheTargetAndGetpeernameShowsTheOriginal) {
  ChildProcess echo = start({bin("fl-vmprobe"), "echo", "tcp", "18080"});
  ASSERT_TRUE(echo.wait_for("ready", 10s)) << echo.out();
  auto r = run({bin("faultctl"), "guard", "--redirect", "192.0.2.10:80=127.0.0.1:18080", "--", bin("fl-vmprobe"),
                "peer", "tcp", "192.0.2.10", "80"});
  EXPECT_EQ(r.status.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "peer 192.0.2.10:80 reply pong ping\n")) << r.out;
  EXPECT_TRUE(has(r.out, "connect 192.0.2.10:80/tcp -> redirect to 127.0.0.1:18080 (rule 1:")) << r.out;
  auto outside = run({bin("fl-vmprobe"), "peer", "tcp", "192.0.2.10", "80"});
  EXPECT_TRUE(has(outside.out, "error ")) << outside.out;
  EXPECT_FALSE(has(outside.out, "reply")) << outside.out;
}

TEST(Redirect, UdpSendtoReachesTheTargetAndTheReplyComesFromTheOriginal) {
  ChildProcess echo = start({bin("fl-vmprobe"), "echo", "udp", "15353"});
  ASSERT_TRUE(echo.wait_for("ready", 10s)) << echo.out();
  auto r = run({bin("faultctl"), "guard", "--redirect", "192.0.2.53:53/udp=127.0.0.1:15353", "--", bin("fl-vmprobe"),
                "peer", "udp", "192.0.2.53", "53"});
  EXPECT_EQ(r.status.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "from 192.0.2.53:53 reply pong ping\n")) << r.out;
  auto outside = run({bin("fl-vmprobe"), "peer", "udp", "192.0.2.53", "53"});
  EXPECT_TRUE(has(outside.out, "error ")) << outside.out;
  EXPECT_FALSE(has(outside.out, "reply")) << outside.out;
}

}  // namespace
}  // namespace flvm
