// faultctl guard --redirect: a guarded Python client reaches a listener through an
// address only the redirect makes reachable, and getpeername()/recvfrom() show it
// the address it asked for; the same client outside the cgroup is not redirected.
//
// Everything runs in a network namespace of the test's own with nothing but lo,
// so the original destinations (TEST-NET 192.0.2.0/24, 2001:db8::/32) have no
// route: a call that is not redirected fails at once (ENETUNREACH) and nothing
// can leave the host. The listener (the "proxy") runs in that namespace outside
// the guarded cgroup.
#include <string>
#include <vector>

#include "enforce_env.h"

namespace flenf {
namespace {

// listener PROTO ADDR PORT: answers "pong " + what it got, prints ACCEPTED per
// connection or datagram.
const std::string kListener = R"(import socket, sys
proto, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ':' in addr else socket.AF_INET
if proto == 'tcp':
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(8)
    print('LISTENING', flush=True)
    while True:
        c, _ = s.accept()
        print('ACCEPTED', flush=True)
        c.sendall(b'pong ' + c.recv(1024))
        c.close()
else:
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, port))
    print('LISTENING', flush=True)
    while True:
        data, src = s.recvfrom(1024)
        print('ACCEPTED', flush=True)
        s.sendto(b'pong ' + data, src)
)";

// client tcp|udp|udpconn ADDR PORT [hold]: sends "ping", prints the peer it sees
// (getpeername), the reply and where recvfrom says it came from, then
// "result ok" or "result ERRNAME"; with hold, waits for stdin to close.
const std::string kClient = R"(import errno, socket, sys
proto, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ':' in addr else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM if proto == 'tcp' else socket.SOCK_DGRAM)
s.settimeout(3)
try:
    if proto == 'udp':
        s.sendto(b'ping', (addr, port))
    else:
        s.connect((addr, port))
        p = s.getpeername()
        print('peer', p[0], p[1], flush=True)
        s.send(b'ping')
    data, src = s.recvfrom(1024)
    print('reply', data.decode(), flush=True)
    if proto != 'tcp':
        print('from', src[0], src[1], flush=True)
    print('result ok', flush=True)
except OSError as e:
    print('result', errno.errorcode.get(e.errno, 'E?') if e.errno else 'TIMEOUT', flush=True)
if sys.argv[4:] == ['hold']:
    print('HOLD', flush=True)
    sys.stdin.read()
)";

std::vector<std::string> in_ns(const Netns& ns, std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"nsenter", "--net=/run/netns/" + ns.name()});
  return argv;
}

struct RedirectRun {
  CommandResult guard;
  CommandResult outside;  // the same client, same namespace, outside the cgroup
  std::string listener;
};

// Starts the listener, runs the client under faultctl guard FLAGS and, while it
// holds (the programs attached), the same client outside the cgroup.
RedirectRun redirect_run(const std::vector<std::string>& flags, const std::string& proto,
                         const std::string& listen_addr, const std::string& listen_port, const std::string& orig,
                         const std::string& orig_port) {
  Netns ns(unique_name("rd"));
  ChildProcess listener =
      spawn(in_ns(ns, {kPython, "-c", kListener, proto == "tcp" ? "tcp" : "udp", listen_addr, listen_port}));
  RedirectRun r;
  if (!listener.wait_for("LISTENING", 10s)) {
    ADD_FAILURE() << "the listener did not start: " << listener.describe();
    return r;
  }
  std::vector<std::string> argv = {kFaultctl, "guard"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  for (const auto& a : in_ns(ns, {kPython, "-c", kClient, proto, orig, orig_port, "hold"})) argv.push_back(a);
  ChildProcess g = spawn(argv, {.stdin_pipe = true});
  bool held = g.wait_for("HOLD", 20s);
  if (held) r.outside = run(in_ns(ns, {kPython, "-c", kClient, proto, orig, orig_port}), 20s);
  g.close_stdin();
  auto e = g.wait(20s);
  r.guard = {e.value_or(ExitStatus{}), g.out(), g.err(), ""};
  EXPECT_TRUE(held) << "the guarded client never reached HOLD: " << g.describe();
  EXPECT_TRUE(e && e->is(0)) << g.describe();
  (void)listener.wait(200ms);  // collect what it printed
  r.listener = listener.out();
  return r;
}

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

class GuardRedirect : public EnforceTest {};

TEST_F(GuardRedirect, TcpIpv4ReachesTheTargetAndGetpeernameShowsTheOriginal) {
  const std::string rule = "192.0.2.10:80=127.0.0.1:18080";
  RedirectRun r = redirect_run({"--redirect", rule}, "tcp", "127.0.0.1", "18080", "192.0.2.10", "80");
  EXPECT_TRUE(has(r.guard.out, "peer 192.0.2.10 80\nreply pong ping\nresult ok\n")) << r.guard.describe();
  EXPECT_TRUE(
      has(r.guard.err, "connect 192.0.2.10:80/tcp -> redirect to 127.0.0.1:18080 (rule 1: --redirect " + rule + ")"))
      << r.guard.describe();
  EXPECT_TRUE(has(r.guard.err, "redirected: 1 calls\n    192.0.2.10:80/tcp -> 127.0.0.1:18080  x1\n"))
      << r.guard.describe();
  // Outside the cgroup, the original has no route: not redirected.
  EXPECT_EQ(r.outside.out, "result ENETUNREACH\n") << r.outside.describe();
  EXPECT_EQ(r.listener, "LISTENING\nACCEPTED\n");
}

TEST_F(GuardRedirect, TcpIpv6ReachesTheTargetAndGetpeernameShowsTheOriginal) {
  RedirectRun r =
      redirect_run({"--redirect", "[2001:db8::10]:443=[::1]:18443"}, "tcp", "::1", "18443", "2001:db8::10", "443");
  EXPECT_TRUE(has(r.guard.out, "peer 2001:db8::10 443\nreply pong ping\nresult ok\n")) << r.guard.describe();
  EXPECT_TRUE(has(r.guard.err, "connect [2001:db8::10]:443/tcp -> redirect to [::1]:18443 (rule 1:"))
      << r.guard.describe();
  EXPECT_EQ(r.outside.out, "result ENETUNREACH\n") << r.outside.describe();
  EXPECT_EQ(r.listener, "LISTENING\nACCEPTED\n");
}

// A dual-stack socket reaching an IPv4 original (v4-mapped) meets the IPv4 rule
// and is sent to the mapped IPv4 target; getpeername gives the mapped original.
TEST_F(GuardRedirect, Ipv4RuleOnAnIpv6SocketKeepsTheMappedOriginal) {
  RedirectRun r = redirect_run({"--redirect", "192.0.2.10:80=127.0.0.1:18080"}, "tcp", "127.0.0.1", "18080",
                               "::ffff:192.0.2.10", "80");
  EXPECT_TRUE(has(r.guard.out, "peer ::ffff:192.0.2.10 80\nreply pong ping\nresult ok\n")) << r.guard.describe();
  EXPECT_EQ(r.outside.out, "result ENETUNREACH\n") << r.outside.describe();
  EXPECT_EQ(r.listener, "LISTENING\nACCEPTED\n");
}

TEST_F(GuardRedirect, UdpSendtoRepliesComeFromTheOriginal) {
  // A CIDR and a port range: 192.0.2.53 port 53 is inside both.
  RedirectRun r = redirect_run({"--redirect", "192.0.2.0/24:50-60/udp=127.0.0.1:15353"}, "udp", "127.0.0.1", "15353",
                               "192.0.2.53", "53");
  EXPECT_TRUE(has(r.guard.out, "reply pong ping\nfrom 192.0.2.53 53\nresult ok\n")) << r.guard.describe();
  EXPECT_TRUE(has(r.guard.err, "sendmsg 192.0.2.53:53/udp -> redirect to 127.0.0.1:15353")) << r.guard.describe();
  EXPECT_EQ(r.outside.out, "result ENETUNREACH\n") << r.outside.describe();
  EXPECT_EQ(r.listener, "LISTENING\nACCEPTED\n");
}

// One unconnected socket, two originals redirected to two targets: each reply
// reads as from its own original (the reply map is per socket and target).
// Datagrams are counted one by one but reported once per socket and target.
TEST_F(GuardRedirect, UdpOneSocketTwoOriginalsEachReplyFromItsOwn) {
  Netns ns(unique_name("rd"));
  ChildProcess a = spawn(in_ns(ns, {kPython, "-c", kListener, "udp", "127.0.0.1", "15355"}));
  ChildProcess b = spawn(in_ns(ns, {kPython, "-c", kListener, "udp", "127.0.0.1", "15356"}));
  ASSERT_TRUE(a.wait_for("LISTENING", 10s)) << a.describe();
  ASSERT_TRUE(b.wait_for("LISTENING", 10s)) << b.describe();
  const std::string script = R"(import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
for data, dest in ((b'a', '192.0.2.61'), (b'a', '192.0.2.61'), (b'b', '192.0.2.62')):
    s.sendto(data, (dest, 53))
got = []
for _ in range(3):
    data, src = s.recvfrom(1024)
    got.append('%s from %s %d' % (data.decode(), src[0], src[1]))
print('\n'.join(sorted(got)), flush=True)
)";
  CommandResult g =
      run({kFaultctl, "guard", "--redirect", "192.0.2.61:53=127.0.0.1:15355", "--redirect",
           "192.0.2.62:53=127.0.0.1:15356", "--", "nsenter", "--net=/run/netns/" + ns.name(), kPython, "-c", script});
  EXPECT_TRUE(g.status.is(0)) << g.describe();
  EXPECT_EQ(g.out, "pong a from 192.0.2.61 53\npong a from 192.0.2.61 53\npong b from 192.0.2.62 53\n") << g.describe();
  EXPECT_TRUE(has(g.err,
                  "redirected: 3 calls\n"
                  "    192.0.2.61:53/udp -> 127.0.0.1:15355  x1\n"
                  "    192.0.2.62:53/udp -> 127.0.0.1:15356  x1\n"))
      << g.describe();
}

TEST_F(GuardRedirect, ConnectedUdpIpv6PeerAndRepliesShowTheOriginal) {
  RedirectRun r =
      redirect_run({"--redirect", "[2001:db8::53]:53=[::1]:15354"}, "udpconn", "::1", "15354", "2001:db8::53", "53");
  EXPECT_TRUE(has(r.guard.out, "peer 2001:db8::53 53\nreply pong ping\nfrom 2001:db8::53 53\nresult ok\n"))
      << r.guard.describe();
  // A connected UDP socket to an address with no route fails at connect.
  EXPECT_EQ(r.outside.out, "result ENETUNREACH\n") << r.outside.describe();
  EXPECT_EQ(r.listener, "LISTENING\nACCEPTED\n");
}

TEST_F(GuardRedirect, OtherPortsOfTheDestinationAreNotRedirected) {
  RedirectRun r =
      redirect_run({"--redirect", "192.0.2.10:80=127.0.0.1:18080"}, "tcp", "127.0.0.1", "18080", "192.0.2.10", "81");
  EXPECT_TRUE(has(r.guard.out, "result ENETUNREACH\n")) << r.guard.describe();
  EXPECT_FALSE(has(r.guard.err, "redirect to")) << r.guard.describe();
  EXPECT_EQ(r.listener, "LISTENING\n");
}

TEST_F(GuardRedirect, EnforcedDenyWinsOverRedirect) {
  RedirectRun r = redirect_run({"--enforce", "--deny", "192.0.2.10", "--redirect", "192.0.2.10:80=127.0.0.1:18080"},
                               "tcp", "127.0.0.1", "18080", "192.0.2.10", "80");
  EXPECT_TRUE(has(r.guard.out, "result EPERM\n")) << r.guard.describe();
  EXPECT_TRUE(has(r.guard.err, "-> deny (--deny 192.0.2.10)")) << r.guard.describe();
  EXPECT_FALSE(has(r.guard.err, "redirect to")) << r.guard.describe();
  EXPECT_TRUE(has(r.guard.err, "redirected: 0 calls")) << r.guard.describe();
  EXPECT_EQ(r.listener, "LISTENING\n") << "a denied connect reached the target";
}

// Monitor mode blocks nothing; a monitored would-deny goes ahead, to the target.
TEST_F(GuardRedirect, MonitoredWouldDenyIsStillRedirected) {
  RedirectRun r = redirect_run({"--deny", "192.0.2.10", "--redirect", "192.0.2.10:80=127.0.0.1:18080"}, "tcp",
                               "127.0.0.1", "18080", "192.0.2.10", "80");
  EXPECT_TRUE(has(r.guard.out, "peer 192.0.2.10 80\nreply pong ping\nresult ok\n")) << r.guard.describe();
  EXPECT_TRUE(has(r.guard.err, "-> would-deny (--deny 192.0.2.10)")) << r.guard.describe();
  EXPECT_TRUE(has(r.guard.err, "-> redirect to 127.0.0.1:18080")) << r.guard.describe();
  EXPECT_EQ(r.listener, "LISTENING\nACCEPTED\n");
}

}  // namespace
}  // namespace flenf
