// The guard's capture modes that need root: transparent capture of a
// command's TCP connections (curl --noproxy '*', a raw python socket, HTTPS
// without the proxy variables under --terminate-tls) judged by request, other
// egress refused in the kernel; and --gateway, shared by agents in another
// network namespace through Proxy-Authorization tokens. Loopback and the
// test's own namespaces only.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <mutex>
#include <nlohmann/json.hpp>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/echo_upstream.h"
#include "selftests/lib/netns_pair.h"
#include "selftests/lib/require_root.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/proxy/seen_upstream.h"
#include "selftests/tls/tls_harness.h"
#include "userspace/proxy/tls_ca.h"

namespace {

using fltest::ChildProcess;
using fltest::CommandResult;
using fltest::SeenUpstream;
using fltest::UniqueFd;
using namespace std::chrono_literals;

const std::string kFaultctl = FAULTCTL_PATH;

// A raw socket (no proxy variables read) that writes one HTTP request, or
// other bytes, and prints the answer's first line ("closed" when none).
const char* kRawClient =
    "import socket, sys\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
    "s.sendall(sys.argv[2].encode().decode('unicode_escape').encode())\n"
    "data = b''\n"
    "while True:\n"
    "  b = s.recv(4096)\n"
    "  if not b: break\n"
    "  data += b\n"
    "print((data.decode(errors='replace').split('\\r\\n')[0] or 'closed') + ' | ' + "
    "data.decode(errors='replace').split('\\r\\n\\r\\n')[-1])\n";

// A UDP datagram to a port that is no resolver's: refused in the kernel.
const char* kUdpClient =
    "import socket\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "try:\n"
    "  s.sendto(b'x', ('127.0.0.1', 9))\n"
    "  print('udp sent')\n"
    "except OSError as e:\n"
    "  print('udp refused', e.errno)\n";

class GuardCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override { env_ = fltest::guard_env(dir_.path(), {"SSL_CERT_FILE=", "CURL_CA_BUNDLE="}); }
  std::string policy(const std::string& json) {
    const std::string file = dir_.file("guard-" + std::to_string(++files_) + ".json");
    fltest::write_file(file, json);
    return file;
  }
  CommandResult guard(std::vector<std::string> flags, std::vector<std::string> cmd) {
    std::vector<std::string> argv = {kFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return fltest::run_command(argv, {.env = env_}, 90s);
  }
  static std::string curl_bypass(const std::string& url) {
    return "curl -sS --noproxy '*' --max-time 20 -w '[%{http_code}]\\n' " + url;
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
  int files_ = 0;
};

// The JSON body of a line "BODY[code]".
nlohmann::json body_of(const std::string& line) {
  return nlohmann::json::parse(line.substr(0, line.rfind('[')), nullptr, false);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    out.push_back(text.substr(at, nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return out;
}

TEST_F(GuardCaptureTest, RootJudgesPlainHttpThatBypassesTheProxyVariables) {
  FL_REQUIRE_ROOT("a cgroup and cgroup BPF programs (transparent capture)");
  SeenUpstream allowed, denied;
  const std::string pol =
      policy(R"({"mode":"enforce","default_allow":false,"rules":[{"name":"up","action":"allow","host":")" +
             allowed.hostport() + R"("}]})");
  const std::string raw_http = "GET /raw HTTP/1.1\\r\\nHost: HOST\\r\\nConnection: close\\r\\n\\r\\n";
  auto raw = [&](const SeenUpstream& u) {
    std::string req = raw_http;
    req.replace(req.find("HOST"), 4, u.hostport());
    return "python3 -c \"$RAW\" " + std::to_string(u.port()) + " '" + req + "'";
  };
  auto r = guard({"--policy", pol, "--identity", "capture-test"},
                 {"env", std::string("RAW=") + kRawClient, std::string("UDP=") + kUdpClient, "sh", "-c",
                  curl_bypass("http://" + allowed.hostport() + "/x") + "; " +
                      curl_bypass("http://" + denied.hostport() + "/y") + "; " + raw(allowed) + "; " + raw(denied) +
                      "; python3 -c \"$RAW\" " + std::to_string(denied.port()) + " 'not http' ; python3 -c \"$UDP\""});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const auto out = lines_of(r.out);
  ASSERT_GE(out.size(), 6u) << r.out << r.err;
  EXPECT_EQ(out[0], "upstream saw GET /x HTTP/1.1[200]") << r.out;
  ASSERT_EQ(out[1].substr(out[1].rfind('[')), "[403]") << r.out;
  EXPECT_EQ(body_of(out[1])["error"], "denied by policy") << out[1];
  EXPECT_EQ(body_of(out[1])["rule"], "") << out[1];  // the default decided
  EXPECT_EQ(out[2], "HTTP/1.1 200 OK | upstream saw GET /raw HTTP/1.1") << r.out;
  EXPECT_EQ(out[3].rfind("HTTP/1.1 403 ", 0), 0u) << r.out;
  EXPECT_EQ(out[4], "closed | ") << r.out;      // not HTTP: judged by address, denied, closed
  EXPECT_EQ(out[5], "udp refused 1") << r.out;  // EPERM: no proxy for UDP
  EXPECT_EQ(allowed.requests(), 2);
  EXPECT_EQ(denied.requests(), 0);
  EXPECT_NE(r.err.find("every TCP connection of the command is captured transparently"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GET http://" + allowed.hostport() + "/x (redirected, to " + allowed.hostport() +
                       ") -> allow (rule up)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("TCP " + denied.hostport() + " (redirected, to " + denied.hostport() + ") -> deny"),
            std::string::npos)
      << r.err;
}

TEST_F(GuardCaptureTest, RootsKernelFenceFollowsTheReloadedPolicysMode) {
  FL_REQUIRE_ROOT("a cgroup and cgroup BPF programs (the kernel fence)");
  const std::string pol =
      policy(R"({"mode":"monitor","default_allow":true,"rules":[{"name":"any","action":"allow","host":"127.0.0.1"}]})");
  const std::string enforcing =
      R"({"mode":"enforce","default_allow":true,"rules":[{"name":"any","action":"allow","host":"127.0.0.1"}]})";
  // UDP to a port no resolver has: reported in monitor, refused once the
  // reloaded policy enforces ($PPID is faultctl; the fence is asked every 100 ms).
  auto r = guard({"--policy", pol}, {"env", std::string("UDP=") + kUdpClient, "sh", "-c",
                                     "python3 -c \"$UDP\"; printf '%s' '" + enforcing + "' > " + pol +
                                         "; kill -HUP $PPID; sleep 1; python3 -c \"$UDP\""});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "udp sent\nudp refused 1\n") << r.describe();
  EXPECT_NE(r.err.find("the kernel fence follows the policy's mode as it is reloaded"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SIGHUP: policy reloaded from " + pol + ": enforce"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the kernel fence follows the policy: enforce: egress outside the proxy"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("denied (while enforcing): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("would have been denied (while monitoring): "), std::string::npos) << r.err;
}

TEST_F(GuardCaptureTest, RootJudgesHttpsWithoutTheProxyVariablesByPathWhenTerminated) {
  FL_REQUIRE_ROOT("a cgroup and cgroup BPF programs (transparent capture)");
  auto ours = faultline::CertificateAuthority::generate();
  ASSERT_TRUE(ours.ok());
  auto leaf = ours->mint_leaf("127.0.0.1");
  ASSERT_TRUE(leaf.ok());
  fltest::write_file(dir_.file("upstream-ca.pem"), ours->cert_pem());
  fltest::HttpsUpstream up(dir_, (*leaf)->cert_pem(), fltest::private_key_pem((*leaf)->key()));
  ASSERT_TRUE(up.started()) << up.describe();
  const std::string pol = policy(
      R"({"mode":"enforce","rules":[{"name":"no-secrets","action":"deny","path":"/secrets/","reason":"not for agents"}]})");
  const std::string base = "https://127.0.0.1:" + std::to_string(up.port());
  auto r = guard({"--policy", pol, "--terminate-tls", "--upstream-ca", dir_.file("upstream-ca.pem")},
                 {"sh", "-c", curl_bypass(base + "/public/a") + "; " + curl_bypass(base + "/v1/secrets/k")});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const auto out = lines_of(r.out);
  ASSERT_GE(out.size(), 2u) << r.out << r.err;
  EXPECT_NE(out[0].find("[200]"), std::string::npos) << r.out << r.err;
  ASSERT_EQ(out[1].substr(out[1].rfind('[')), "[403]") << r.out << r.err;
  EXPECT_EQ(body_of(out[1])["rule"], "no-secrets") << out[1];
  EXPECT_EQ(body_of(out[1])["reason"], "not for agents") << out[1];
  EXPECT_EQ(up.requests(), 1);  // only /public/a
  EXPECT_NE(r.err.find("/v1/secrets/k (redirected, to 127.0.0.1:" + std::to_string(up.port()) + ") -> deny"),
            std::string::npos)
      << r.err;
}

// The gateway in namespace -a (the "host side"), an upstream beside it, and
// agents' curl in namespace -b through the veth pair.
TEST_F(GuardCaptureTest, GatewayTakesAgentsFromAnotherNamespaceByToken) {
  FL_REQUIRE_ROOT("network namespaces");
  const std::string prefix = "flgw" + std::to_string(::getpid() % 100000);
  fltest::NetnsPair pair(prefix, {prefix + "h", {"198.18.77.1/24"}}, {prefix + "c", {"198.18.77.2/24"}},
                         {.ipv6 = false});
  // The upstream, on the gateway's side (its loopback).
  auto upstream = fltest::spawn_echo_upstream(pair.a());
  const auto address = fltest::echo_upstream_address(upstream);
  ASSERT_TRUE(address) << upstream.describe();
  const std::string up = *address;
  const std::string pol = policy(
      R"({"mode":"enforce","default_allow":false,"rules":[{"name":"up","action":"allow","host":")" + up + R"("}]})");
  auto gw = ChildProcess::spawn({"ip", "netns", "exec", pair.a(), kFaultctl, "guard", "--gateway", "--addr",
                                 "198.18.77.1:3128", "--gateway-token", "alice=alice-token-1", "--gateway-token",
                                 "ci=ci-token-22", "--terminate-tls", "--policy", pol},
                                {.env = env_});
  ASSERT_TRUE(gw.wait_for("agents send requests through", 20s, fltest::Stream::kStderr)) << gw.describe();
  auto agent_curl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"ip",  "netns",      "exec", pair.b(), "curl",
                                     "-sS", "--max-time", "20",   "-w",     "[%{http_code}]"};
    argv.insert(argv.end(), args.begin(), args.end());
    return fltest::run_command(argv, {.env = env_}, 30s);
  };
  auto allowed =
      agent_curl({"-x", "http://198.18.77.1:3128", "--proxy-user", "alice:alice-token-1", "http://" + up + "/ok"});
  EXPECT_EQ(allowed.out, "upstream saw /ok[200]") << allowed.describe();
  auto bearer = agent_curl({"-x", "http://198.18.77.1:3128", "--proxy-header",
                            "Proxy-Authorization: Bearer ci-token-22", "http://127.0.0.1:1/nothing-there"});
  ASSERT_EQ(bearer.out.substr(bearer.out.rfind('[')), "[403]") << bearer.describe();
  auto wrong =
      agent_curl({"-x", "http://198.18.77.1:3128", "--proxy-user", "alice:not-the-token", "http://" + up + "/ok"});
  EXPECT_EQ(wrong.out.substr(wrong.out.rfind('[')), "[407]") << wrong.describe();
  auto none = agent_curl({"-x", "http://198.18.77.1:3128", "http://" + up + "/ok"});
  EXPECT_EQ(none.out.substr(none.out.rfind('[')), "[407]") << none.describe();
  auto ca = agent_curl({"http://198.18.77.1:3128/__faultline/ca.crt"});
  EXPECT_NE(ca.out.find("-----BEGIN CERTIFICATE-----"), std::string::npos) << ca.describe();
  EXPECT_EQ(ca.out.substr(ca.out.rfind('[')), "[200]") << ca.describe();
  gw.signal(SIGINT);
  auto done = gw.wait(10s);
  ASSERT_TRUE(done && done->is(0)) << gw.describe();
  const std::string err = gw.err();
  EXPECT_NE(err.find("GET http://" + up + "/ok [alice] -> allow (rule up)"), std::string::npos) << err;
  EXPECT_NE(err.find("/nothing-there [ci] -> deny"), std::string::npos) << err;
  EXPECT_NE(err.find("requests 2  allowed 1  denied 1"), std::string::npos) << err;
  upstream.stop();
  EXPECT_NE(upstream.out().find("REQ /ok"), std::string::npos);
}

// A Go binary (Debian's gh) through a terminating guard as root: Go ignores
// the proxy variables for loopback, so the connect is captured in the kernel
// and redirected; gh trusts the guard's leaf through SSL_CERT_FILE (Go's
// crypto/x509 reads it). gh takes no port with --hostname, so the stand-in
// (a GitHub-API-like answer) listens on 127.0.0.1:443: skipped loudly when
// that port is taken.
TEST_F(GuardCaptureTest, GhApiTrustsTheGuardsCaThroughSslCertFile) {
  FL_REQUIRE_ROOT("a cgroup and cgroup BPF programs (transparent capture)");
  if (!fltest::run_command({"sh", "-c", "command -v gh"}, {}, 10s).status.is(0))
    GTEST_SKIP() << "*** SKIPPED: gh is missing: run scripts/install-deps.sh ***";
  auto ours = faultline::CertificateAuthority::generate();
  ASSERT_TRUE(ours.ok());
  auto leaf = ours->mint_leaf("127.0.0.1");
  ASSERT_TRUE(leaf.ok());
  fltest::write_file(dir_.file("upstream-ca.pem"), ours->cert_pem());
  fltest::write_file(dir_.file("api.pem"), (*leaf)->cert_pem());
  fltest::write_file(dir_.file("api.key"), fltest::private_key_pem((*leaf)->key()));
  auto server = ChildProcess::spawn({"python3", std::string(GUARD_TEST_DIR) + "/git_https_standin.py",
                                     dir_.file("api.pem"), dir_.file("api.key"), dir_.path(), "443"},
                                    {.merge_stderr = true});
  auto port = server.wait_line_starting("PORT ", 10s);
  if (!port) GTEST_SKIP() << "*** SKIPPED: 127.0.0.1:443 is taken here: " << server.describe() << " ***";
  const std::string gh = "GH_CONFIG_DIR=" + dir_.file("gh") +
                         " GH_ENTERPRISE_TOKEN=standin-token GH_NO_UPDATE_NOTIFIER=1 GH_PROMPT_DISABLED=1 "
                         "gh api --hostname 127.0.0.1 /user";
  auto r = guard({"--enforce", "--terminate-tls", "--upstream-ca", dir_.file("upstream-ca.pem"), "--json-log",
                  dir_.file("gh.jsonl")},
                 {"sh", "-c", gh + " && echo ok-with-ca; env -u SSL_CERT_FILE " + gh + " || echo refused-without-ca"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("\"login\": \"standin-user\""), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("ok-with-ca"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("refused-without-ca"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("x509: certificate signed by unknown authority"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/api/v3/user (redirected, to 127.0.0.1:443) -> allow"), std::string::npos) << r.err;
}

}  // namespace
