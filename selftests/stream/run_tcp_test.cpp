// faultctl run tcp end to end: real TCP connections on loopback, redirected in
// the kernel to faultctl's proxy, which applies the toxics and connects where
// the client asked to go. A python echo server (outside every fault's scope) and
// python clients that time their round trips and report what getpeername() says.
//
// Host-wide faults target the private port of the test's own server, so nothing
// else on the machine is touched; each test has its own state folder and bpffs
// root, as every faultctl test does.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "selftests/lib/child_process.h"
#include "selftests/lib/require_root.h"
#include "selftests/lib/test_bpffs.h"
#include "selftests/lib/test_cgroup.h"

namespace {

using namespace std::chrono_literals;
using fltest::ChildProcess;
using fltest::CommandResult;
using fltest::Stream;

const std::string kFaultctl = FAULTCTL_PATH;
const std::string kPython = ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";

// Echoes every connection, each on its own thread; prints "PORT n" once listening.
const std::string kEchoServer = R"(import socket, sys, threading
family = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
srv = socket.socket(family, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], 0))
srv.listen(64)
print('PORT', srv.getsockname()[1], flush=True)
def echo(c):
    with c:
        while True:
            try:
                b = c.recv(65536)
            except OSError:
                return
            if not b:
                return
            c.sendall(b)
while True:
    c, _ = srv.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
)";

// python3 client.py OUT ADDR PORT ROUNDS [PAUSE_S] [v6]: one connection, ROUNDS
// timed round trips (PAUSE_S apart), then {"peer", "rtt_ms": [...], "error"} in OUT.
// With v6, an AF_INET6 socket (an IPv4 ADDR is then written ::ffff:a.b.c.d).
const std::string kClient = R"(import json, socket, sys, time
out, addr, port, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0
v6 = len(sys.argv) > 6 or ':' in addr
res = {'peer': None, 'rtt_ms': [], 'error': None}
try:
    s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect((addr, port))
    res['peer'] = list(s.getpeername()[:2])
    for i in range(rounds):
        if i and pause:
            time.sleep(pause)
        t = time.monotonic()
        s.sendall(b'ping %d' % i)
        got = b''
        while len(got) < len(b'ping %d' % i):
            b = s.recv(100)
            if not b:
                raise ConnectionError('closed by the peer')
            got += b
        res['rtt_ms'].append((time.monotonic() - t) * 1000)
except OSError as e:
    res['error'] = type(e).__name__
with open(out, 'w') as f:
    json.dump(res, f)
)";

class RunTcpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FL_REQUIRE_ROOT("cgroup programs and a host-wide redirect");
    if (fltest::cgroup2_mount().empty()) GTEST_SKIP() << "no cgroup v2 mount";
    dir_ = "/tmp/flstream" + std::to_string(::getpid()) + "x" + std::to_string(++serial_);
    std::filesystem::create_directories(dir_);
    ::chmod(dir_.c_str(), 0700);
    bpffs_ = "/sys/fs/bpf/flstream" + std::to_string(::getpid()) + "x" + std::to_string(serial_);
    ::setenv("FAULTLINE_RUN_DIR", (dir_ + "/run").c_str(), 1);
    ::setenv("FAULTLINE_BPFFS_ROOT", bpffs_.c_str(), 1);
    std::ofstream(dir_ + "/echo.py") << kEchoServer;
    std::ofstream(dir_ + "/client.py") << kClient;
  }
  void TearDown() override {
    for (auto& s : servers_) s.stop();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
    fltest::remove_test_bpffs_root(bpffs_);
    ::unsetenv("FAULTLINE_RUN_DIR");
    ::unsetenv("FAULTLINE_BPFFS_ROOT");
  }

  // An echo server on addr; its port.
  int echo_server(const std::string& addr) {
    servers_.push_back(ChildProcess::spawn({kPython, dir_ + "/echo.py", addr}));
    auto line = servers_.back().wait_line_starting("PORT ", 10s);
    EXPECT_TRUE(line) << servers_.back().describe();
    return line ? std::stoi(line->substr(5)) : 0;
  }

  std::vector<std::string> client_argv(const std::string& out, const std::string& addr, int port, int rounds,
                                       double pause = 0, bool v6 = false) {
    std::vector<std::string> a = {
        kPython, dir_ + "/client.py", out, addr, std::to_string(port), std::to_string(rounds), std::to_string(pause)};
    if (v6) a.push_back("v6");
    return a;
  }

  // Runs a client from this process (outside any fault's cgroup) to its end.
  nlohmann::json client(const std::string& addr, int port, int rounds, bool v6 = false) {
    const std::string out = dir_ + "/c" + std::to_string(++clients_) + ".json";
    CommandResult r = fltest::run_command(client_argv(out, addr, port, rounds, 0, v6), {}, 30s);
    EXPECT_TRUE(r.status.is(0)) << r.describe();
    return read_json(out);
  }

  static nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return nlohmann::json::parse(ss.str(), nullptr, false);
  }

  // A faultctl run tcp in the background, once its fault is applied.
  ChildProcess start_fault(std::vector<std::string> args) {
    args.insert(args.begin(), {kFaultctl, "run", "tcp"});
    ChildProcess p = ChildProcess::spawn(args);
    EXPECT_TRUE(p.wait_for("tcp fault t", 15s, Stream::kStdout) || p.wait_for("tcp fault t", 1s, Stream::kStderr))
        << p.describe();
    return p;
  }

  nlohmann::json status() {
    CommandResult s = fltest::run_command({kFaultctl, "status", "--json"}, {}, 20s);
    EXPECT_TRUE(s.status.is(0)) << s.describe();
    return nlohmann::json::parse(s.out, nullptr, false);
  }

  std::string dir_, bpffs_;
  std::vector<ChildProcess> servers_;
  int clients_ = 0;
  static inline int serial_ = 0;
};

double max_of(const nlohmann::json& a) {
  double m = 0;
  for (const auto& v : a) m = std::max(m, v.get<double>());
  return m;
}
double min_of(const nlohmann::json& a) {
  double m = 1e9;
  for (const auto& v : a) m = std::min(m, v.get<double>());
  return m;
}

// A command's connections to the target get the latency; the client still sees
// the target as its peer; a connection from outside the scope is untouched.
TEST_F(RunTcpTest, LatencyOnACommandsConnections) {
  const int port = echo_server("127.0.0.1");
  const std::string out = dir_ + "/cmd.json";
  std::vector<std::string> args = {
      kFaultctl, "run",           "tcp",        "--target", "127.0.0.1:" + std::to_string(port),
      "--toxic", "latency=200ms", "--duration", "30s",      "--"};
  for (const auto& a : client_argv(out, "127.0.0.1", port, 4)) args.push_back(a);
  ChildProcess fault = ChildProcess::spawn(args);
  // Meanwhile, from outside the command's cgroup: direct.
  ASSERT_TRUE(fault.wait_for("tcp fault t", 15s, Stream::kStderr) || fault.wait_for("tcp fault t", 1s))
      << fault.describe();
  nlohmann::json outside = client("127.0.0.1", port, 3);
  CommandResult r = fault.finish(60s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  nlohmann::json c = read_json(out);
  ASSERT_TRUE(c.is_object() && c["error"].is_null()) << c.dump() << "\n" << r.describe();
  EXPECT_EQ(c["peer"], nlohmann::json::array({"127.0.0.1", port})) << "getpeername shows the target, not the proxy";
  ASSERT_EQ(c["rtt_ms"].size(), 4u);
  EXPECT_GE(min_of(c["rtt_ms"]), 200.0) << c.dump();
  // Under 2x the delay: once per round trip, never twice (slack for a loaded machine).
  EXPECT_LT(max_of(c["rtt_ms"]), 360.0) << c.dump();
  ASSERT_TRUE(outside["error"].is_null()) << outside.dump();
  EXPECT_LT(max_of(outside["rtt_ms"]), 100.0) << "a connection from outside the scope was delayed: " << outside.dump();
  EXPECT_NE(r.err.find("1 connections through the proxy"), std::string::npos) << r.describe();
}

// Host-wide on an IPv6 target: reset_peer resets the client's connection;
// status lists the fault; abort ends it, and connections go direct again.
TEST_F(RunTcpTest, HostWideResetOnIpv6ThenAbort) {
  const int port = echo_server("::1");
  // The reply is held (timeout=0) until the reset 300 ms in: the client is in
  // recv() when it comes, so it sees ECONNRESET, never a race with its send.
  ChildProcess fault = start_fault({"--target", "[::1]:" + std::to_string(port), "--toxic", "timeout=0", "--toxic",
                                    "reset_peer=300ms", "--duration", "60s"});
  nlohmann::json c = client("::1", port, 1);
  EXPECT_EQ(c["error"], "ConnectionResetError") << c.dump();
  nlohmann::json st = status();
  ASSERT_EQ(st["tcp_faults"].size(), 1u) << st.dump();
  const std::string id = st["tcp_faults"][0]["id"];
  EXPECT_EQ(id.front(), 't');
  EXPECT_EQ(st["tcp_faults"][0]["mechanism"], "proxy");
  EXPECT_GE(st["tcp_faults"][0]["counters"]["redirected"].get<int>(), 1) << st.dump();
  CommandResult ab = fltest::run_command({kFaultctl, "abort", id}, {}, 20s);
  EXPECT_TRUE(ab.status.is(0)) << ab.describe();
  auto code = fault.wait(20s);
  ASSERT_TRUE(code) << fault.describe();
  EXPECT_TRUE(code->is(1)) << "aborted from outside: exit 1; " << fault.describe();
  nlohmann::json after = client("::1", port, 2);
  EXPECT_TRUE(after["error"].is_null()) << after.dump();
  EXPECT_TRUE(status()["tcp_faults"].empty());
}

// An IPv4 target reached from an AF_INET6 socket (::ffff:127.0.0.1) is
// intercepted too, and the peer it sees is the mapped target.
TEST_F(RunTcpTest, V4MappedConnectIsIntercepted) {
  const int port = echo_server("127.0.0.1");
  ChildProcess fault =
      start_fault({"--target", "127.0.0.1:" + std::to_string(port), "--toxic", "latency=100ms", "--duration", "60s"});
  nlohmann::json c = client("::ffff:127.0.0.1", port, 2, true);
  ASSERT_TRUE(c["error"].is_null()) << c.dump();
  EXPECT_EQ(c["peer"], nlohmann::json::array({"::ffff:127.0.0.1", port}));
  EXPECT_GE(min_of(c["rtt_ms"]), 100.0) << c.dump();
  CommandResult ab = fltest::run_command({kFaultctl, "abort", "--all"}, {}, 20s);
  EXPECT_TRUE(ab.status.is(0)) << ab.describe();
  EXPECT_TRUE(fault.wait(20s)) << fault.describe();
}

// The end: a connection opened under the fault is released at once (no toxic
// from then on) and is not cut; the run ends on time by itself.
TEST_F(RunTcpTest, ExpiryReleasesOpenConnections) {
  const int port = echo_server("127.0.0.1");
  ChildProcess fault =
      start_fault({"--target", "127.0.0.1:" + std::to_string(port), "--toxic", "latency=150ms", "--duration", "2s"});
  // 8 round trips 0.5 s apart: the first ones under the fault, the last ones after it.
  const std::string out = dir_ + "/held.json";
  CommandResult r = fltest::run_command(client_argv(out, "127.0.0.1", port, 8, 0.5), {}, 30s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  nlohmann::json c = read_json(out);
  ASSERT_TRUE(c["error"].is_null()) << c.dump() << "\n" << fault.describe();
  ASSERT_EQ(c["rtt_ms"].size(), 8u);
  EXPECT_GE(c["rtt_ms"][0].get<double>(), 150.0) << c.dump();
  EXPECT_LT(c["rtt_ms"][7].get<double>(), 50.0) << "still delayed after the end: " << c.dump();
  auto code = fault.wait(20s);
  ASSERT_TRUE(code) << fault.describe();
  EXPECT_TRUE(code->is(0)) << fault.describe();
  EXPECT_NE(fault.out().find("1 open connections released"), std::string::npos) << fault.describe();
}

// A fault no connection met says so: UNTESTED, not a quiet success.
TEST_F(RunTcpTest, NoConnectionIsUntested) {
  const int port = echo_server("127.0.0.1");
  CommandResult r = fltest::run_command({kFaultctl, "run", "tcp", "--target", "127.0.0.1:" + std::to_string(port),
                                         "--toxic", "noop", "--duration", "300ms"},
                                        {}, 30s);
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("UNTESTED"), std::string::npos) << r.describe();
}

// run latency --via proxy: the packet fault's flags, as a stream delay on what
// this host sends to the target.
TEST_F(RunTcpTest, LatencyViaProxy) {
  const int port = echo_server("127.0.0.1");
  ChildProcess fault =
      ChildProcess::spawn({kFaultctl, "run", "latency", "--target", "127.0.0.1", "--port", std::to_string(port),
                           "--delay", "100ms", "--via", "proxy", "--duration", "60s"});
  ASSERT_TRUE(fault.wait_for("tcp fault t", 15s) || fault.wait_for("tcp fault t", 1s, Stream::kStderr))
      << fault.describe();
  EXPECT_NE(fault.err().find("notice: --via proxy"), std::string::npos) << fault.describe();
  nlohmann::json c = client("127.0.0.1", port, 3);
  ASSERT_TRUE(c["error"].is_null()) << c.dump();
  EXPECT_GE(min_of(c["rtt_ms"]), 100.0) << c.dump();
  EXPECT_LT(max_of(c["rtt_ms"]), 180.0) << c.dump() << ": once per round trip, never twice";
  CommandResult ab = fltest::run_command({kFaultctl, "abort", "--all"}, {}, 20s);
  EXPECT_TRUE(ab.status.is(0)) << ab.describe();
  EXPECT_TRUE(fault.wait(20s)) << fault.describe();
}

// faultctl run http: a command's requests to a real HTTP server (python's
// http.server) are answered per request: /api gets the fault's 503, / goes
// through; an LLM preset answers with the provider's own status and envelope.
const std::string kHttpClient = R"(import json, sys, urllib.request, urllib.error
out = []
for path in sys.argv[2:]:
    try:
        with urllib.request.urlopen('http://127.0.0.1:%s%s' % (sys.argv[1], path), timeout=10) as r:
            out.append([path, r.status, ''])
    except urllib.error.HTTPError as e:
        out.append([path, e.code, e.read().decode()])
print(json.dumps(out))
)";

TEST_F(RunTcpTest, HttpFaultsPerRequest) {
  std::ofstream(dir_ + "/get.py") << kHttpClient;
  servers_.push_back(ChildProcess::spawn({kPython, "-m", "http.server", "-b", "127.0.0.1", "0"}));
  auto line = servers_.back().wait_line_starting("Serving HTTP on", 10s);
  ASSERT_TRUE(line) << servers_.back().describe();
  const auto at = line->find("port ");
  ASSERT_NE(at, std::string::npos) << *line;
  const int port = std::stoi(line->substr(at + 5));
  CommandResult r = fltest::run_command({kFaultctl,
                                         "run",
                                         "http",
                                         "--target",
                                         "127.0.0.1:" + std::to_string(port),
                                         "--path",
                                         "/api",
                                         "--status",
                                         "503",
                                         "--body",
                                         "down for maintenance",
                                         "--duration",
                                         "30s",
                                         "--",
                                         kPython,
                                         dir_ + "/get.py",
                                         std::to_string(port),
                                         "/api/orders",
                                         "/",
                                         "/api"},
                                        {}, 60s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const auto got = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')), nullptr, false);
  ASSERT_TRUE(got.is_array() && got.size() == 3) << r.describe();
  EXPECT_EQ(got[0], nlohmann::json::array({"/api/orders", 503, "down for maintenance"})) << r.describe();
  EXPECT_EQ(got[1][1], 200) << r.describe();
  EXPECT_EQ(got[2][1], 503) << r.describe();
  EXPECT_NE(r.err.find("status on 2 requests"), std::string::npos) << r.describe();

  CommandResult llm = fltest::run_command({kFaultctl, "run", "http", "--target", "127.0.0.1:" + std::to_string(port),
                                           "--llm", "rate-limit", "--llm-provider", "openai", "--duration", "30s", "--",
                                           kPython, dir_ + "/get.py", std::to_string(port), "/v1/chat/completions"},
                                          {}, 60s);
  ASSERT_TRUE(llm.status.is(0)) << llm.describe();
  const auto l = nlohmann::json::parse(llm.out.substr(0, llm.out.find('\n')), nullptr, false);
  ASSERT_TRUE(l.is_array() && l.size() == 1) << llm.describe();
  EXPECT_EQ(l[0][1], 429) << llm.describe();
  const auto envelope = nlohmann::json::parse(l[0][2].get<std::string>(), nullptr, false);
  EXPECT_EQ(envelope["error"]["code"], "rate_limit_exceeded") << llm.describe();

  // Headers: urllib's User-Agent contains "Python-urllib" (faulted); no request
  // carries X-Tenant (not faulted).
  for (const auto& [flag, match, want] : std::vector<std::tuple<std::string, std::string, int>>{
           {"--header-contains", "User-Agent=Python-urllib", 503}, {"--header-equals", "X-Tenant=blue", 200}}) {
    CommandResult h = fltest::run_command(
        {kFaultctl, "run", "http", "--target", "127.0.0.1:" + std::to_string(port), flag, match, "--status", "503",
         "--duration", "30s", "--", kPython, dir_ + "/get.py", std::to_string(port), "/"},
        {}, 60s);
    const auto g = nlohmann::json::parse(h.out.substr(0, h.out.find('\n')), nullptr, false);
    ASSERT_TRUE(g.is_array() && g.size() == 1) << h.describe();
    EXPECT_EQ(g[0][1], want) << flag << " " << match << "\n" << h.describe();
  }
}

struct BadInput {
  std::vector<std::string> args;
  std::string message;
};

TEST(RunTcpBadInput, EachNamesWhatIsWrong) {
  const std::vector<BadInput> cases = {
      {{"--toxic", "latency=1s", "--duration", "10s"}, "--target is required"},
      {{"--target", "127.0.0.1", "--toxic", "noop", "--duration", "10s"}, "the port is missing"},
      {{"--target", "::1:80", "--toxic", "noop", "--duration", "10s"}, "[ADDR]:PORT"},
      {{"--target", "127.0.0.1:0", "--toxic", "noop", "--duration", "10s"}, "ports are 1-65535"},
      {{"--target", "300.1.1.1:80", "--toxic", "noop", "--duration", "10s"}, "--target 300.1.1.1:80"},
      {{"--target", "127.0.0.1:80", "--duration", "10s"}, "--toxic is required"},
      {{"--target", "127.0.0.1:80", "--toxic", "lag=1s", "--duration", "10s"}, "unknown toxic 'lag'"},
      {{"--target", "127.0.0.1:80", "--toxic", "latency", "--duration", "10s"}, "latency needs a value"},
      {{"--target", "127.0.0.1:80", "--toxic", "latency=fast", "--duration", "10s"}, "latency=fast"},
      {{"--target", "127.0.0.1:80", "--toxic", "latency=1500us", "--duration", "10s"}, "whole number of milliseconds"},
      {{"--target", "127.0.0.1:80", "--toxic", "latency=1s,size=3", "--duration", "10s"}, "'size' does not apply"},
      {{"--target", "127.0.0.1:80", "--toxic", "latency=1s,jitter=1s,jitter=2s", "--duration", "10s"}, "given twice"},
      {{"--target", "127.0.0.1:80", "--toxic", "bandwidth=fast", "--duration", "10s"}, "KB/s"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop=3", "--duration", "10s"}, "noop takes no value"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop,direction=left", "--duration", "10s"}, "direction=left"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop,toxicity=2", "--duration", "10s"}, "toxicity=2"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop", "--toxicity", "-1", "--duration", "10s"}, "--toxicity -1"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop", "--direction", "both", "--duration", "10s"}, "--direction both"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop"}, "--duration is required"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop", "--duration", "2h"}, "over the cap of 1h"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop", "--duration", "10s", "--drain", "1h"}, "--drain"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop", "--duration", "10s", "--cgroup", "/x", "--", "true"},
       "give one scope"},
      {{"--target", "127.0.0.1:80", "--toxic", "noop", "--duration", "10s", "--cgroup", "/no/such/flcgroup"},
       "--cgroup"},
  };
  const std::vector<BadInput> via_proxy = {
      {{"latency", "--target", "127.0.0.1", "--delay", "10ms", "--dev", "lo", "--via", "proxy"},
       "--dev has no meaning"},
      {{"latency", "--target", "127.0.0.1", "--delay", "10ms", "--proto", "udp", "--via", "proxy"}, "TCP only"},
      {{"latency", "--target", "127.0.0.1", "--delay", "1500us", "--via", "proxy"}, "whole milliseconds"},
      {{"latency", "--target", "127.0.0.1", "--delay", "10ms", "--via", "pigeon"}, "--via 'pigeon'"},
      {{"loss", "--target", "127.0.0.1", "--percent", "10", "--via", "proxy"}, "--via does not apply to a loss"},
  };
  const std::vector<BadInput> http = {
      {{"--target", "127.0.0.1:80", "--duration", "10s"}, "give exactly one fault"},
      {{"--target", "127.0.0.1:80", "--status", "503", "--reset", "--duration", "10s"}, "give exactly one fault"},
      {{"--target", "127.0.0.1:80", "--status", "42", "--duration", "10s"}, "--status 42"},
      {{"--target", "127.0.0.1:80", "--delay", "2m", "--duration", "10s"}, "--delay 2m"},
      {{"--target", "127.0.0.1:80", "--delay", "1s", "--delay-at", "later", "--duration", "10s"}, "--delay-at later"},
      {{"--target", "127.0.0.1:80", "--reset", "--body", "x", "--duration", "10s"}, "--body does not apply"},
      {{"--target", "127.0.0.1:80", "--llm", "melted", "--duration", "10s"}, "unknown preset \"melted\""},
      {{"--target", "127.0.0.1:80", "--llm", "overloaded", "--llm-provider", "acme", "--duration", "10s"},
       "unknown provider"},
      {{"--target", "127.0.0.1:80", "--truncate", "-1", "--duration", "10s"}, "--truncate -1"},
      {{"--target", "127.0.0.1:80", "--status", "503", "--percent", "130", "--duration", "10s"}, "--percent"},
      {{"--target", "127.0.0.1:80", "--status", "503", "--attempts", "0", "--duration", "10s"}, "--attempts 0"},
      {{"--status", "503", "--duration", "10s"}, "--target is required"},
      {{"--target", "127.0.0.1:80", "--status", "503", "--header-equals", "x-tenant", "--duration", "10s"},
       "--header-equals x-tenant: expected NAME=VALUE"},
      {{"--target", "127.0.0.1:80", "--status", "503", "--header-contains", "bad name=1", "--duration", "10s"},
       "--header-contains bad name=1: expected NAME=VALUE, NAME a header name"},
      {{"--target", "127.0.0.1:443", "--reset", "--header-equals", "x-tenant=a", "--duration", "10s"},
       "--header-equals on 127.0.0.1:443: matching on headers needs the request's content"},
  };
  for (const auto& c : http) {
    std::vector<std::string> argv = {kFaultctl, "run", "http"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CommandResult r = fltest::run_command(argv, {}, 20s);
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "expected \"" << c.message << "\"\n" << r.describe();
  }
  for (const auto& c : via_proxy) {
    std::vector<std::string> argv = {kFaultctl, "run"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    argv.insert(argv.end(), {"--duration", "10s"});
    CommandResult r = fltest::run_command(argv, {}, 20s);
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "expected \"" << c.message << "\"\n" << r.describe();
  }
  for (const auto& c : cases) {
    std::vector<std::string> argv = {kFaultctl, "run", "tcp"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CommandResult r = fltest::run_command(argv, {}, 20s);
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "expected \"" << c.message << "\"\n" << r.describe();
  }
}

}  // namespace
