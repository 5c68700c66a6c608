// faultctl guard with stock programs (python3's socket module, curl), its exit
// code, what it leaves behind (nothing), its --json-log, and the exfil cap.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "enforce_env.h"

namespace flenf {
namespace {

class GuardTest : public EnforceTest {};

// Connects (TCP) and sends (UDP) to 127.0.0.1:PORT, prints "tcp NAME" and "udp NAME"
// where NAME is ok or the errno's symbolic name, as a Python program sees it.
std::string python_client(uint16_t port) {
  return "import socket, errno\n"
         "def name(f):\n"
         "    try:\n"
         "        f(); return 'ok'\n"
         "    except OSError as e:\n"
         "        return errno.errorcode[e.errno]\n"
         "def tcp():\n"
         "    s = socket.socket(); s.settimeout(5); s.connect(('127.0.0.1', " +
         std::to_string(port) +
         ")); s.close()\n"
         "def udp():\n"
         "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', " +
         std::to_string(port) +
         ")); s.close()\n"
         "print('tcp', name(tcp), flush=True)\n"
         "print('udp', name(udp), flush=True)\n";
}

// Running or sleeping; a zombie waiting for init to reap it is dead.
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

TEST_F(GuardTest, PythonSeesEpermAndTheChosenErrno) {
  TcpServer server;
  const std::string script = python_client(server.port());
  const std::string deny = "127.0.0.1:" + std::to_string(server.port());

  CommandResult enforced = run({kFaultctl, "guard", "--enforce", "--deny", deny, "--", kPython, "-c", script});
  EXPECT_TRUE(enforced.status.is(0)) << enforced.describe();
  EXPECT_NE(enforced.out.find("tcp EPERM\nudp EPERM\n"), std::string::npos) << enforced.describe();

  CommandResult chosen =
      run({kFaultctl, "guard", "--enforce", "--deny-errno", "EACCES", "--deny", deny, "--", kPython, "-c", script});
  EXPECT_NE(chosen.out.find("tcp EACCES\nudp EACCES\n"), std::string::npos) << chosen.describe();

  CommandResult monitored = run({kFaultctl, "guard", "--deny", deny, "--", kPython, "-c", script});
  EXPECT_NE(monitored.out.find("tcp ok\nudp ok\n"), std::string::npos) << monitored.describe();
  EXPECT_NE(monitored.err.find("would-deny (--deny " + deny + ")"), std::string::npos) << monitored.describe();

  // Outside any guard, the same program reaches the server. Only the monitored
  // run and this one connect; the server thread accepts in its own time.
  CommandResult outside = run({kPython, "-c", script});
  EXPECT_NE(outside.out.find("tcp ok\nudp ok\n"), std::string::npos) << outside.describe();
  for (int i = 0; i < 100 && server.accepted() < 2; ++i) ::usleep(20'000);
  EXPECT_EQ(server.accepted(), 2);
}

TEST_F(GuardTest, CurlIsRefusedInsideAndServedOutsideAtTheSameTime) {
  TcpServer server(false, /*http=*/true);
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/";
  // The guarded shell runs curl, then waits on stdin: the policy is attached
  // while the curl outside runs.
  ChildProcess g = spawn({kFaultctl, "guard", "--enforce", "--deny", "127.0.0.1:" + std::to_string(server.port()), "--",
                          "sh", "-c", "curl -sS -v --max-time 5 " + url + "; echo curl-exit=$?; read x || true"},
                         {.stdin_pipe = true});
  ASSERT_TRUE(g.wait_for("curl-exit=", 20s)) << g.describe();
  CommandResult outside = run({"curl", "-sS", "--max-time", "5", url});
  g.close_stdin();
  auto e = g.wait(20s);
  ASSERT_TRUE(e && e->is(0)) << g.describe();
  // curl's exit 7 is "failed to connect"; -v prints the errno text.
  EXPECT_NE(g.out().find("curl-exit=7"), std::string::npos) << g.describe();
  EXPECT_NE(g.err().find("Operation not permitted"), std::string::npos) << g.describe();
  EXPECT_TRUE(outside.status.is(0)) << outside.describe();
  EXPECT_EQ(outside.out, "hello\n") << outside.describe();
}

TEST_F(GuardTest, ExitCodeIsPassedThroughAndTheCgroupRemoved) {
  CommandResult r42 = run({kFaultctl, "guard", "--", "sh", "-c", "exit 42"});
  EXPECT_TRUE(r42.status.is(42)) << r42.describe();
  CommandResult killed = run({kFaultctl, "guard", "--enforce", "--", "sh", "-c", "kill -KILL $$"});
  EXPECT_TRUE(killed.status.is(128 + SIGKILL)) << killed.describe();
  CommandResult missing = run({kFaultctl, "guard", "--", "/nonexistent/flenf-command"});
  EXPECT_TRUE(missing.status.is(127)) << missing.describe();
  // The fixture checks after each test that no faultline-*-<pid> cgroup of ours is left.
}

TEST_F(GuardTest, GuardCgroupHoldsTheCommandAndGoesAwayWithItsChildren) {
  ChildProcess g = spawn({kFaultctl, "guard", "--enforce", "--", "sh", "-c", "sleep 600 & " + kProbe + " hold"},
                         {.stdin_pipe = true});
  ASSERT_TRUE(g.wait_for("HOLD", 20s)) << g.describe();
  const std::string cg = cgroup2_mount() + "/faultline-guard-" + std::to_string(g.pid());
  ASSERT_TRUE(is_dir(cg)) << "expected the guard's cgroup at " << cg;
  std::ifstream procs(cg + "/cgroup.procs");
  std::vector<pid_t> members;
  for (pid_t p; procs >> p;) members.push_back(p);
  EXPECT_EQ(members.size(), 3u) << "sh, sleep and fl_probe should be in " << cg;
  EXPECT_EQ(std::count(members.begin(), members.end(), g.pid()), 0) << "faultctl itself must stay outside";
  g.close_stdin();
  auto e = g.wait(20s);
  ASSERT_TRUE(e && e->is(0)) << g.describe();
  EXPECT_FALSE(is_dir(cg)) << cg << " is still there";
  for (pid_t p : members) EXPECT_FALSE(alive(p)) << "pid " << p << " outlived the guard";
}

TEST_F(GuardTest, SigtermIsForwardedToTheCommand) {
  ChildProcess g = spawn({kFaultctl, "guard", "--", kProbe, "hold"}, {.stdin_pipe = true});
  ASSERT_TRUE(g.wait_for("HOLD", 20s)) << g.describe();
  ::kill(g.pid(), SIGTERM);
  auto e = g.wait(10s);
  ASSERT_TRUE(e.has_value()) << g.describe();
  EXPECT_TRUE(e->is(128 + SIGTERM)) << g.describe();
}

TEST_F(GuardTest, JsonLogHasOneLinePerDecision) {
  Netns ns(unique_name("json"), {.local_ranges = true});
  const std::string log = "/tmp/" + unique_name("guard.jsonl");
  CommandResult r = run({kFaultctl,    "guard",
                         "--enforce",  "--default-deny",
                         "--allow",    "198.18.0.0/24:80",
                         "--deny",     "198.18.0.9",
                         "--json-log", log,
                         "--",         kProbe,
                         "--netns",    ns.name(),
                         "connect",    "tcp",
                         "198.18.0.2", "80",
                         "1",          "connect",
                         "tcp",        "198.18.0.9",
                         "80",         "1",
                         "connect",    "tcp",
                         "198.18.1.1", "80",
                         "1",          "sendto",
                         "2001:2::1",  "53",
                         "1"});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  std::ifstream in(log);
  ASSERT_TRUE(in.good()) << "no " << log << "\n" << r.describe();
  std::vector<nlohmann::json> lines;
  for (std::string l; std::getline(in, l);) {
    auto j = nlohmann::json::parse(l, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << l;
    lines.push_back(j);
  }
  ::unlink(log.c_str());
  auto find = [&](const std::string& dest) -> const nlohmann::json* {
    for (const auto& j : lines)
      if (j.value("destination", "") == dest) return &j;
    return nullptr;
  };
  ASSERT_EQ(lines.size(), 4u) << r.describe();
  const auto* allow = find("198.18.0.2:80");
  ASSERT_NE(allow, nullptr);
  EXPECT_EQ(allow->value("op", ""), "connect");
  EXPECT_EQ(allow->value("proto", ""), "tcp");
  EXPECT_EQ(allow->value("verdict", ""), "allow");
  EXPECT_EQ(allow->value("rule", ""), "--allow 198.18.0.0/24:80");
  EXPECT_EQ(allow->value("comm", ""), "fl_probe");
  EXPECT_GT(allow->value("pid", 0), 0);
  const auto* deny = find("198.18.0.9:80");
  ASSERT_NE(deny, nullptr);
  EXPECT_EQ(deny->value("verdict", ""), "deny");
  EXPECT_EQ(deny->value("rule", ""), "--deny 198.18.0.9");
  const auto* dflt = find("198.18.1.1:80");
  ASSERT_NE(dflt, nullptr);
  EXPECT_EQ(dflt->value("verdict", ""), "deny");
  EXPECT_EQ(dflt->value("rule", ""), "default deny");
  const auto* v6 = find("[2001:2::1]:53");
  ASSERT_NE(v6, nullptr);
  EXPECT_EQ(v6->value("op", ""), "sendmsg");
  EXPECT_EQ(v6->value("proto", ""), "udp");
  EXPECT_EQ(v6->value("verdict", ""), "deny");
}

// Each allow/deny rule counts the calls it decided, in the kernel; the summary
// lists them, and a rule that decided nothing shows 0.
TEST_F(GuardTest, SummaryCountsTheCallsEachRuleDecided) {
  Netns ns(unique_name("hits"), {.local_ranges = true});
  CommandResult r = run({kFaultctl,    "guard",      "--enforce", "--allow",       "198.18.0.0/24:80",
                         "--deny",     "198.18.0.9", "--deny",    "198.18.5.0/24", "--",
                         kProbe,       "--netns",    ns.name(),   "connect",       "tcp",
                         "198.18.0.2", "80",         "3",         "connect",       "tcp",
                         "198.18.0.9", "80",         "2",         "connect",       "tcp",
                         "198.18.1.1", "80",         "4"});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("    --allow 198.18.0.0/24:80  3\n"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("    --deny 198.18.0.9  2\n"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("    --deny 198.18.5.0/24  0\n"), std::string::npos) << r.describe();
}

// A sender inside the guard sends fixed-size datagrams to a receiver in this
// process (outside the cgroup). The cap counts IP bytes (header included), so
// exactly floor(cap / packet) datagrams may pass: the cap fires within one packet.
TEST_F(GuardTest, ExfilCapStopsWithinOnePacketAndSparesAllowedAndOutside) {
  UdpReceiver capped, allowed;
  constexpr long kPayload = 572, kPacket = kPayload + 20 + 8, kCap = 10000, kSend = 40;
  const std::string cp = std::to_string(capped.port()), ap = std::to_string(allowed.port());
  ChildProcess g = spawn({kFaultctl,
                          "guard",
                          "--enforce",
                          "--exfil-cap",
                          std::to_string(kCap),
                          "--allow",
                          "127.0.0.1:" + ap + "/udp",
                          "--",
                          kProbe,
                          "udpflood",
                          "127.0.0.1",
                          cp,
                          std::to_string(kPayload),
                          std::to_string(kSend),
                          "udpflood",
                          "127.0.0.1",
                          ap,
                          std::to_string(kPayload),
                          std::to_string(kSend),
                          "hold"},
                         {.stdin_pipe = true});
  ASSERT_TRUE(g.wait_for("HOLD", 30s)) << g.describe();
  // Past the cap for the guarded command, this process still gets through.
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(capped.port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string payload(kPayload, 'o');
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(::sendto(fd, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)), kPayload);
  ::close(fd);
  ::usleep(300'000);
  g.close_stdin();
  auto e = g.wait(20s);
  ASSERT_TRUE(e && e->is(0)) << g.describe();

  const long from_guard = capped.datagrams() - 5;
  EXPECT_EQ(capped.bytes(), (from_guard + 5) * kPayload);
  EXPECT_LE(from_guard * kPacket, kCap) << "more than the cap went out";
  EXPECT_LT(kCap - from_guard * kPacket, kPacket)
      << "the cap fired more than one packet early: " << from_guard << " datagrams of " << kPacket
      << " IP bytes against a cap of " << kCap;
  EXPECT_EQ(allowed.datagrams(), kSend) << "an allowed destination must not be capped";
  auto res = results(g.out());
  const Counts& sent = res["udpflood 127.0.0.1:" + cp];
  EXPECT_EQ(count_of(sent, "ok") + count_of(sent, "EPERM"), kSend) << show(sent);
  EXPECT_EQ(count_of(sent, "EPERM"), kSend - from_guard) << "the sender sees each dropped datagram: " << show(sent);
  EXPECT_NE(g.err().find("exfil-cap"), std::string::npos) << g.describe();
  EXPECT_NE(g.err().find("exfil cap: 127.0.0.1:" + cp + " after " + std::to_string(from_guard * kPacket) + " bytes"),
            std::string::npos)
      << g.describe();
}

// A deny rule never exempts a destination from the cap: only allow rules do. In
// monitor mode a connect matching a deny rule goes ahead; the flow it opens must
// still count against the cap (connected UDP, so the flow starts at connect()).
// Monitor mode blocks nothing, the exfil cap included: it reports the crossing for
// every destination no allow rule covers (a deny rule's match is no exemption).
TEST_F(GuardTest, ExfilCapInMonitorModeReportsAndDropsNothing) {
  UdpReceiver denied, plain;
  constexpr long kPayload = 572, kCap = 10000, kSend = 40;
  const std::string dp = std::to_string(denied.port()), pp = std::to_string(plain.port());
  CommandResult r = run({kFaultctl, "guard", "--exfil-cap", std::to_string(kCap), "--deny", "127.0.0.1:" + dp, "--",
                         kProbe, "udpconnflood", "127.0.0.1", dp, std::to_string(kPayload), std::to_string(kSend),
                         "udpconnflood", "127.0.0.1", pp, std::to_string(kPayload), std::to_string(kSend)});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  ::usleep(200'000);
  EXPECT_EQ(plain.datagrams(), kSend) << "monitor mode dropped packets\n" << r.describe();
  EXPECT_EQ(denied.datagrams(), kSend) << "monitor mode dropped packets\n" << r.describe();
  EXPECT_NE(r.err.find("exfil cap: 127.0.0.1:" + pp + " after"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("exfil cap: 127.0.0.1:" + dp + " after"), std::string::npos)
      << "a --deny rule exempted its destination from the cap\n"
      << r.describe();
  EXPECT_NE(r.err.find("(monitor: not dropped)"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("connect 127.0.0.1:" + dp + "/udp -> would-deny"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace flenf
