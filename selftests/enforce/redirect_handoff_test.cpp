// The proxy's side of --redirect: a listener that accepts a redirected TCP
// connection learns, from the kernel, where the client asked to go
// (find_redirected_conn), exactly once; a connection nobody redirected has no
// answer. IPv4, IPv6 and an IPv4 original on a dual-stack socket.
//
// As in guard_redirect_test.cpp, everything runs in a namespace of the test's
// own with only lo, so the originals (TEST-NET) have no route. The listener is
// this test process, its sockets made inside that namespace.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <thread>

#include "base/unique_fd.h"
#include "enforce_env.h"
#include "userspace/enforce/redirected_conns.h"
#include "userspace/net/address.h"

namespace flenf {
namespace {

using faultline::UniqueFd;

// A listening socket on addr:port inside the namespace (made on a thread that
// enters it; a socket stays in the namespace it was made in).
UniqueFd listen_in(const Netns& ns, const std::string& addr, uint16_t port) {
  UniqueFd out;
  std::thread([&] {
    UniqueFd nsfd(::open(ns.path().c_str(), O_RDONLY | O_CLOEXEC));
    if (!nsfd || ::setns(nsfd.get(), CLONE_NEWNET) != 0) return;
    const bool v6 = addr.find(':') != std::string::npos;
    UniqueFd s(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (v6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(port);
      ::inet_pton(AF_INET6, addr.c_str(), &in6->sin6_addr);
      len = sizeof(*in6);
    } else {
      auto* in = reinterpret_cast<sockaddr_in*>(&ss);
      in->sin_family = AF_INET;
      in->sin_port = htons(port);
      ::inet_pton(AF_INET, addr.c_str(), &in->sin_addr);
      len = sizeof(*in);
    }
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(s.get(), 16) != 0) return;
    out = std::move(s);
  }).join();
  return out;
}

UniqueFd accept_within(int listener, int ms) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, ms) != 1) return UniqueFd();
  return UniqueFd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

// Connects to ADDR PORT for each pair of arguments, says "connected" after each,
// then holds until stdin closes (the guard's hooks stay on meanwhile).
const std::string kConnector = R"(import socket, sys
socks = []
args = sys.argv[1:]
for addr, port in zip(args[0::2], args[1::2]):
    s = socket.socket(socket.AF_INET6 if ':' in addr else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect((addr, int(port)))
    socks.append(s)
    print('connected', addr, port, flush=True)
print('HOLD', flush=True)
sys.stdin.read()
)";

std::string orig_text(const std::optional<faultline::RedirectedConn>& c) {
  return c ? faultline::endpoint_text(c->orig, c->orig_port) : "(none)";
}

class RedirectHandoff : public EnforceTest {};

TEST_F(RedirectHandoff, TheProxyLearnsEachOriginalOnceAndNothingForAPlainConnection) {
  Netns ns(unique_name("rh"));
  UniqueFd l4 = listen_in(ns, "127.0.0.1", 18090);
  UniqueFd l6 = listen_in(ns, "::1", 18091);
  ASSERT_TRUE(l4 && l6) << "cannot listen in " << ns.name();

  ChildProcess g = spawn({kFaultctl, "guard", "--redirect", "192.0.2.10:80=127.0.0.1:18090", "--redirect",
                          "[2001:db8::10]:443=[::1]:18091", "--", "nsenter", "--net=" + ns.path(), kPython, "-c",
                          kConnector, "192.0.2.10", "80", "2001:db8::10", "443", "::ffff:192.0.2.10", "80"},
                         {.stdin_pipe = true});
  const struct {
    int listener;
    const char* want;
  } expected[] = {{l4.get(), "192.0.2.10:80"}, {l6.get(), "[2001:db8::10]:443"}, {l4.get(), "192.0.2.10:80"}};
  for (const auto& e : expected) {
    UniqueFd c = accept_within(e.listener, 20000);
    ASSERT_TRUE(c) << "no redirected connection arrived: " << g.describe();
    auto got = faultline::find_redirected_conn(c.get());
    ASSERT_TRUE(got) << got.error().describe();
    EXPECT_EQ(orig_text(*got), e.want);
    auto again = faultline::find_redirected_conn(c.get());
    ASSERT_TRUE(again) << again.error().describe();
    EXPECT_EQ(orig_text(*again), "(none)") << "an entry is taken by the proxy that accepted it";
  }
  ASSERT_TRUE(g.wait_for("HOLD", 20s)) << g.describe();

  // The same listener reached directly, by a process outside the guard: no answer.
  ChildProcess plain =
      spawn({"nsenter", "--net=" + ns.path(), kPython, "-c", kConnector, "127.0.0.1", "18090"}, {.stdin_pipe = true});
  UniqueFd c = accept_within(l4.get(), 20000);
  ASSERT_TRUE(c) << plain.describe();
  auto got = faultline::find_redirected_conn(c.get());
  ASSERT_TRUE(got) << got.error().describe();
  EXPECT_EQ(orig_text(*got), "(none)");
  plain.close_stdin();
  EXPECT_TRUE(plain.wait(10s)) << plain.describe();

  g.close_stdin();
  auto st = g.wait(20s);
  EXPECT_TRUE(st && st->is(0)) << g.describe();
}

}  // namespace
}  // namespace flenf
