// faultctl run syscall on the socket family (cgroup hooks + bpf_set_retval):
// socket() and connect() errnos at 100% and at a percent, for a wrapped command,
// an existing cgroup and one pid; the same calls from outside the scope pass.
#include <cmath>
#include <nlohmann/json.hpp>

#include "enforce_env.h"

namespace flenf {
namespace {

class SyscallSocketTest : public EnforceTest {};

// `run syscall ... -- fl_probe ACTIONS hold`; once the probe holds, `outside`
// runs the same ACTIONS outside the fault's scope. Returns (inside, outside).
std::pair<std::map<std::string, Counts>, std::map<std::string, Counts>> syscall_and_outside(
    const std::vector<std::string>& flags, const std::vector<std::string>& actions, std::string* log = nullptr) {
  std::vector<std::string> argv = {kFaultctl, "run", "syscall"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--duration", "60s", "--", kProbe});
  argv.insert(argv.end(), actions.begin(), actions.end());
  argv.push_back("hold");
  ChildProcess f = spawn(argv, {.stdin_pipe = true});
  std::map<std::string, Counts> outside;
  bool held = f.wait_for("HOLD", 30s);
  if (held) {
    std::vector<std::string> o = {kProbe};
    o.insert(o.end(), actions.begin(), actions.end());
    CommandResult r = run(o, 30s);
    EXPECT_TRUE(r.status.is(0)) << r.describe();
    outside = results(r.out);
  }
  f.close_stdin();
  auto e = f.wait(30s);
  EXPECT_TRUE(held) << f.describe();
  EXPECT_TRUE(e && e->is(0)) << f.describe();
  if (log != nullptr) *log = f.describe();
  return {results(f.out()), outside};
}

TEST_F(SyscallSocketTest, SocketFailsWithEachErrnoInsideOnly) {
  for (const char* err : {"EMFILE", "ENFILE", "EACCES", "ENOBUFS", "EAFNOSUPPORT"}) {
    SCOPED_TRACE(err);
    std::string log;
    auto [in, out] = syscall_and_outside({"--syscall", "socket", "--errno", err, "--percent", "100"},
                                         {"socket", "tcp", "3", "socket", "udp6", "2", "socket", "unix", "2"}, &log);
    EXPECT_EQ(show(in["socket tcp"]), std::string(err) + ":3") << log;
    EXPECT_EQ(show(in["socket udp6"]), std::string(err) + ":2") << log;
    EXPECT_EQ(show(in["socket unix"]), "ok:2") << "unix sockets are left alone\n" << log;
    EXPECT_EQ(show(out["socket tcp"]), "ok:3");
    EXPECT_EQ(show(out["socket udp6"]), "ok:2");
    EXPECT_NE(log.find("): 5 calls failed with " + std::string(err)), std::string::npos) << log;
  }
}

TEST_F(SyscallSocketTest, PythonSocketSeesEmfile) {
  const std::string script =
      "import socket, errno\n"
      "try:\n"
      "    socket.socket(); print('socket ok')\n"
      "except OSError as e:\n"
      "    print('socket', errno.errorcode[e.errno])\n";
  CommandResult in = run({kFaultctl, "run", "syscall", "--syscall", "socket", "--errno", "EMFILE", "--percent", "100",
                          "--duration", "30s", "--", kPython, "-c", script});
  EXPECT_TRUE(in.status.is(0)) << in.describe();
  EXPECT_NE(in.out.find("socket EMFILE\n"), std::string::npos) << in.describe();
  CommandResult out = run({kPython, "-c", script});
  EXPECT_EQ(out.out, "socket ok\n") << out.describe();
}

TEST_F(SyscallSocketTest, ConnectFailsWithEachErrnoAtFullRate) {
  TcpServer server;
  const std::string port = std::to_string(server.port());
  for (const char* err : {"ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH", "EHOSTUNREACH", "ECONNRESET", "EACCES"}) {
    SCOPED_TRACE(err);
    const long before = server.accepted();
    std::string log;
    auto [in, out] =
        syscall_and_outside({"--syscall", "connect", "--errno", err},
                            {"connect", "tcp", "127.0.0.1", port, "20", "connect", "udp", "::1", "53", "3"}, &log);
    EXPECT_EQ(show(in["tcp 127.0.0.1:" + port]), std::string(err) + ":20") << log;
    EXPECT_EQ(show(in["udp [::1]:53"]), std::string(err) + ":3") << log;
    EXPECT_EQ(show(out["tcp 127.0.0.1:" + port]), "ok:20");
    EXPECT_EQ(show(out["udp [::1]:53"]), "ok:3");
    // Only the 20 connects from outside reached the listener.
    for (int i = 0; i < 50 && server.accepted() < before + 20; ++i) ::usleep(20'000);
    EXPECT_EQ(server.accepted(), before + 20);
  }
}

// Binomial: n = 400, p = 0.5, sd = 10. Five sd either way fails about once in
// 1.7 million runs by chance; a broken percent (0, 100, or ignored) fails always.
TEST_F(SyscallSocketTest, ConnectFailsAtAPercent) {
  TcpServer server;
  const std::string port = std::to_string(server.port());
  constexpr long n = 400;
  auto [in, out] = syscall_and_outside({"--syscall", "connect", "--errno", "ECONNREFUSED", "--percent", "50"},
                                       {"connect", "tcp", "127.0.0.1", port, std::to_string(n)});
  const Counts& c = in["tcp 127.0.0.1:" + port];
  const long failed = count_of(c, "ECONNREFUSED");
  EXPECT_EQ(failed + count_of(c, "ok"), n) << show(c);
  EXPECT_GE(failed, 150) << show(c);
  EXPECT_LE(failed, 250) << show(c);
  EXPECT_EQ(show(out["tcp 127.0.0.1:" + port]), "ok:" + std::to_string(n));
}

// --cgroup: the fault applies to every member of an existing cgroup for its
// duration, and ends on time (the in-kernel expiry, then the links go).
TEST_F(SyscallSocketTest, ConnectFaultOnACgroupEndsOnTime) {
  TcpServer server;
  const std::string port = std::to_string(server.port());
  TestCgroup cg(unique_name("sc"));
  ChildProcess f = spawn({kFaultctl, "run", "syscall", "--syscall", "connect", "--errno", "ECONNRESET", "--duration",
                          "4s", "--cgroup", cg.relative()});
  ASSERT_TRUE(f.wait_for("syscall fault s", 20s, Stream::kEither)) << f.describe();
  const std::vector<std::string> probe = {kProbe, "connect", "tcp", "127.0.0.1", port, "5"};
  CommandResult in = run(probe, 20s, {.cgroup = cg.path()});
  CommandResult out = run(probe);
  EXPECT_EQ(show(results(in.out)["tcp 127.0.0.1:" + port]), "ECONNRESET:5") << in.describe() << f.describe();
  EXPECT_EQ(show(results(out.out)["tcp 127.0.0.1:" + port]), "ok:5") << out.describe();
  auto e = f.wait(20s);
  ASSERT_TRUE(e && e->is(0)) << f.describe();
  EXPECT_NE(f.describe().find("): 5 calls failed with ECONNRESET"), std::string::npos) << f.describe();
  CommandResult after = run(probe, 20s, {.cgroup = cg.path()});
  EXPECT_EQ(show(results(after.out)["tcp 127.0.0.1:" + port]), "ok:5") << "the fault outlived its duration\n"
                                                                       << after.describe();
}

// --pid: one process of a cgroup is hit, its neighbour in the same cgroup is not.
TEST_F(SyscallSocketTest, ConnectFaultOnOnePidSparesItsCgroupNeighbour) {
  TcpServer server;
  const std::string port = std::to_string(server.port());
  TestCgroup cg(unique_name("pid"));
  const std::vector<std::string> probe = {kProbe, "wait", "connect", "tcp", "127.0.0.1", port, "10"};
  ChildProcess target = spawn(probe, {.cgroup = cg.path(), .stdin_pipe = true});
  ChildProcess neighbour = spawn(probe, {.cgroup = cg.path(), .stdin_pipe = true});
  ASSERT_TRUE(target.wait_for("WAITING", 10s)) << target.describe();
  ASSERT_TRUE(neighbour.wait_for("WAITING", 10s)) << neighbour.describe();
  ChildProcess f = spawn({kFaultctl, "run", "syscall", "--syscall", "connect", "--errno", "EHOSTUNREACH", "--duration",
                          "60s", "--pid", std::to_string(target.pid())});
  ASSERT_TRUE(f.wait_for("syscall fault s", 20s, Stream::kEither)) << f.describe();
  target.write_stdin("\n");
  neighbour.write_stdin("\n");
  ASSERT_TRUE(target.wait(10s)) << target.describe();
  ASSERT_TRUE(neighbour.wait(10s)) << neighbour.describe();
  f.stop();
  EXPECT_EQ(show(results(target.out())["tcp 127.0.0.1:" + port]), "EHOSTUNREACH:10")
      << target.describe() << f.describe();
  EXPECT_EQ(show(results(neighbour.out())["tcp 127.0.0.1:" + port]), "ok:10") << neighbour.describe();
}

// Each socket syscall is failed alone: sendto fails, connect and bind do not;
// then bind fails and sendto does not.
TEST_F(SyscallSocketTest, SendtoAndBindFailOnlyWhenChosen) {
  const std::vector<std::string> actions = {"sendto", "127.0.0.1", "9",   "4",         "sendto", "::1", "9",
                                            "2",      "connect",   "udp", "127.0.0.1", "9",      "2",   "bind",
                                            "tcp",    "127.0.0.1", "3",   "bind",      "udp",    "::1", "2"};
  std::string log;
  auto [in, out] = syscall_and_outside({"--syscall", "sendto", "--errno", "ENOBUFS"}, actions, &log);
  EXPECT_EQ(show(in["sendto 127.0.0.1:9"]), "ENOBUFS:4") << log;
  EXPECT_EQ(show(in["sendto [::1]:9"]), "ENOBUFS:2") << log;
  EXPECT_EQ(show(in["udp 127.0.0.1:9"]), "ok:2") << log;
  EXPECT_EQ(show(in["bindtcp 127.0.0.1:0"]), "ok:3") << log;
  EXPECT_EQ(show(out["sendto 127.0.0.1:9"]), "ok:4");

  auto [bin, bout] = syscall_and_outside({"--syscall", "bind", "--errno", "EADDRINUSE"}, actions, &log);
  EXPECT_EQ(show(bin["bindtcp 127.0.0.1:0"]), "EADDRINUSE:3") << log;
  EXPECT_EQ(show(bin["bindudp [::1]:0"]), "EADDRINUSE:2") << log;
  EXPECT_EQ(show(bin["sendto 127.0.0.1:9"]), "ok:4") << log;
  EXPECT_EQ(show(bout["bindtcp 127.0.0.1:0"]), "ok:3");
  EXPECT_EQ(show(bout["bindudp [::1]:0"]), "ok:2");
}

TEST_F(SyscallSocketTest, RunSyscallPassesTheExitCodeThrough) {
  CommandResult cgroup_way = run({kFaultctl, "run", "syscall", "--syscall", "connect", "--errno", "EIO", "--duration",
                                  "10s", "--", "sh", "-c", "exit 5"});
  EXPECT_TRUE(cgroup_way.status.is(5)) << cgroup_way.describe();
  CommandResult seccomp_way = run({kFaultctl, "run", "syscall", "--syscall", "unlink", "--errno", "EIO", "--duration",
                                   "10s", "--", "sh", "-c", "exit 6"});
  EXPECT_TRUE(seccomp_way.status.is(6)) << seccomp_way.describe();
}

}  // namespace
}  // namespace flenf
