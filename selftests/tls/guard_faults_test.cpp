// HTTP faults of `faultctl guard` (--fault-*, --faults FILE) and TLS on
// `faultctl run http` (--tls, --terminate-tls, --upstream-ca): every bad input
// refused by name at parse time, then the real binary as root with curl
// against an HTTPS upstream on loopback: terminated faults seen by curl
// trusting only what the guard handed it, pass-through by SNI, a faults file,
// and a destination the policy denies never faulted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "ctl/guard_args.h"
#include "ctl/http_args.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/require_root.h"
#include "selftests/lib/test_bpffs.h"
#include "selftests/tls/tls_harness.h"

namespace {

using faultline::CertificateAuthority;
using fltest::CommandResult;
using namespace std::chrono_literals;

struct BadInput {
  std::vector<std::string> args;
  std::string says;
};

std::string joined_args(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

class GuardFaultsParse : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = CertificateAuthority::generate();
    ASSERT_TRUE(ca.ok());
    fltest::write_file(dir_.file("ca.pem"), ca->cert_pem());
    fltest::write_file(dir_.file("not-pem.txt"), "hello\n");
  }
  fltest::TempDir dir_;
};

TEST_F(GuardFaultsParse, EveryBadFaultFlagIsNamed) {
  FL_REQUIRE_ROOT("--faults, which acts in the kernel (the guard refuses it to a user)");
  const std::string cmd = "--";
  const std::vector<BadInput> table = {
      {{"--fault-status", "503"}, "--fault-host is required"},
      {{"--fault-host", "127.0.0.1:8080"}, "give exactly one of"},
      {{"--fault-host", "127.0.0.1:8080", "--fault-status", "503", "--fault-reset"}, "give exactly one of"},
      {{"--fault-status", "503", "--fault-path", "/x"}, "--fault-host is required"},
      {{"--fault-host", "", "--fault-reset"}, "--fault-host: empty"},
      {{"--fault-host", "127.0.0.1:0", "--fault-reset"}, "--fault-host 127.0.0.1:0: the port must be one number"},
      {{"--fault-host", "127.0.0.1:80-90", "--fault-reset"}, "the port must be one number"},
      {{"--fault-host", "[::1", "--fault-reset"}, "without its closing ]"},
      {{"--fault-host", "no-such-host.invalid", "--fault-reset"}, "--fault-host no-such-host.invalid: "},
      {{"--fault-host", "127.0.0.1:80", "--fault-status", "42"}, "--fault-status 42: a whole number from 200 to 599"},
      {{"--fault-host", "127.0.0.1:80", "--fault-status", "5x3"}, "--fault-status 5x3"},
      {{"--fault-host", "127.0.0.1:80", "--fault-delay", "0s"}, "--fault-delay 0s: whole milliseconds"},
      {{"--fault-host", "127.0.0.1:80", "--fault-delay", "2m"},
       "--fault-delay 2m: whole milliseconds, from 1ms to 60s"},
      {{"--fault-host", "127.0.0.1:80", "--fault-delay", "soon"}, "--fault-delay soon"},
      {{"--fault-host", "127.0.0.1:80", "--fault-truncate", "-1"}, "--fault-truncate -1: a whole number"},
      {{"--fault-host", "127.0.0.1:80", "--fault-llm", "sleepy"}, "--fault-llm sleepy: not a preset"},
      {{"--fault-host", "127.0.0.1:80", "--fault-reset", "--fault-pct", "140"}, "--fault-pct 140"},
      {{"--fault-host", "127.0.0.1:80", "--fault-reset", "--fault-path", "payments"},
       "--fault-path payments: must "
       "start with /"},
      // Port 443 (the default) is TLS: without termination only delay and reset, on the host alone.
      {{"--fault-host", "127.0.0.1", "--fault-status", "503"},
       "--fault-status on 127.0.0.1:443: a status fault needs the request's content, which TLS hides without "
       "--terminate-tls"},
      {{"--fault-host", "127.0.0.1", "--fault-llm", "overloaded"}, "--fault-llm on 127.0.0.1:443: a llm fault"},
      {{"--fault-host", "127.0.0.1", "--fault-truncate", "10"}, "--fault-truncate on 127.0.0.1:443"},
      {{"--fault-host", "127.0.0.1", "--fault-reset", "--fault-path", "/x"},
       "--fault-path on 127.0.0.1:443: matching on the path needs the request's content"},
      {{"--fault-host", "127.0.0.1:80", "--fault-llm", "overloaded", "--fault-llm-provider", "gemini"},
       "--fault-llm-provider gemini: not a provider (anthropic, openai"},
      {{"--fault-host", "127.0.0.1:80", "--fault-status", "503", "--fault-llm-provider", "openai"},
       "--fault-llm-provider applies to an llm fault only"},
      {{"--fault-host", "127.0.0.1:80", "--fault-reset", "--fault-attempts", "0"},
       "--fault-attempts 0: a whole number from 1 to 100"},
      {{"--fault-host", "127.0.0.1:80", "--fault-reset", "--fault-attempts", "many"}, "--fault-attempts many"},
      {{"--fault-host", "127.0.0.1", "--fault-reset", "--fault-attempts", "2"}, "--fault-attempts on 127.0.0.1:443"},
      {{"--upstream-ca", "x.pem"}, "--upstream-ca applies to --terminate-tls"},
      {{"--fault-host", "127.0.0.1", "--fault-reset", "--upstream-ca", dir_.file("ca.pem")},
       "--upstream-ca needs --terminate-tls"},
      {{"--terminate-tls", "--fault-host", "127.0.0.1", "--fault-reset", "--upstream-ca", dir_.file("not-pem.txt")},
       "--upstream-ca " + dir_.file("not-pem.txt") + ": not a readable PEM file of certificates"},
      {{"--terminate-tls", "--fault-host", "127.0.0.1", "--fault-reset", "--upstream-ca", dir_.file("missing.pem")},
       "--upstream-ca " + dir_.file("missing.pem")},
      {{"--netns", "blue", "--fault-host", "127.0.0.1", "--fault-reset"}, "--netns with HTTP faults"},
      {{"--faults", ""}, "--faults: empty file name"},
      {{"--faults", dir_.file("missing.yaml")}, "--faults "},
  };
  for (const auto& t : table) {
    std::vector<std::string> args = t.args;
    args.insert(args.end(), {"--", "true"});
    auto r = faultline::parse_guard_args(args);
    ASSERT_FALSE(r.ok()) << joined_args(t.args) << ": accepted";
    EXPECT_NE(r.error().message.find(t.says), std::string::npos)
        << joined_args(t.args) << "\n  said: " << r.error().message << "\n  want: " << t.says;
  }
}

TEST_F(GuardFaultsParse, EveryBadFaultsFileIsNamedWithItsLine) {
  FL_REQUIRE_ROOT("--faults, which acts in the kernel (the guard refuses it to a user)");
  const std::vector<std::pair<std::string, std::string>> table = {
      {"", "expected a non-empty list of faults"},
      {"faults: []\n", "expected a non-empty list of faults"},
      {"fault:\n  - host: 127.0.0.1:80\n", ":1:1: fault: unknown field"},
      {"- host: 127.0.0.1:80\n  status: 503\n  colour: red\n", ":3:3: faults[0].colour: unknown field (host, path,"},
      {"- host: 127.0.0.1:80\n  status: 503\n- host: 127.0.0.1:80\n  status: 42\n",
       ":4:11: faults[1].status 42: a whole number from 200 to 599"},
      {"- host: 127.0.0.1:80\n", ":1:3: faults[0]: give exactly one of status, delay, reset, truncate, llm (found 0)"},
      {"- status: 503\n", ":1:3: faults[0]: host is required"},
      {"- host: 127.0.0.1:80\n  reset: maybe\n", ":2:10: faults[0].reset: true or false, got maybe"},
      {"- host: 127.0.0.1:80\n  status: [503]\n", ":2:11: faults[0].status: expected a single value"},
      {"- 127.0.0.1\n", ":1:3: faults[0]: expected a mapping"},
      {"- host: 127.0.0.1\n  status: 503\n", "faults[0].status on 127.0.0.1:443: a status fault needs"},
      {"[{\"host\": \"127.0.0.1:80\", \"status\": 503, \"pct\": \"x\"}]", "faults[0].pct x"},
      {"{\"faults\": [{\"host\": \"127.0.0.1:80\", \"delay\": \"forever\"}]}", "faults[0].delay forever"},
      {"- host: 127.0.0.1:80\n  status: 503\n  bad: [", "not YAML or JSON"},
      {"- host: 127.0.0.1:80\n  llm: overloaded\n  llm-provider: acme\n",
       "faults[0].llm-provider acme: not a provider"},
      {"- host: 127.0.0.1:80\n  reset: true\n  attempts: 101\n", ":3:13: faults[0].attempts 101: a whole number"},
  };
  int i = 0;
  for (const auto& [text, says] : table) {
    const std::string file = dir_.file("faults" + std::to_string(++i) + ".yaml");
    fltest::write_file(file, text);
    auto r = faultline::parse_guard_args({"--faults", file, "--", "true"});
    ASSERT_FALSE(r.ok()) << text << ": accepted";
    EXPECT_NE(r.error().message.find(says), std::string::npos)
        << text << "\n  said: " << r.error().message << "\n  want: " << says;
    EXPECT_EQ(r.error().message.rfind("--faults " + file, 0), 0u) << r.error().message;
  }
}

TEST_F(GuardFaultsParse, GoodFaultsParseFromFlagsAndFiles) {
  FL_REQUIRE_ROOT("--faults, which acts in the kernel (the guard refuses it to a user)");
  fltest::write_file(dir_.file("f.yaml"),
                     "faults:\n  - host: 127.0.0.1:8080\n    path: /a\n    status: 502\n    pct: 50\n"
                     "  - host: 127.0.0.1\n    reset: true\n");
  fltest::write_file(dir_.file("f.json"),
                     R"([{"host": "[::1]:8443", "llm": "rate-limit", "llm-provider": "openai", "path": "/v1/",
                          "attempts": 2}])");
  auto r = faultline::parse_guard_args(
      {"--fault-host", "127.0.0.1:9", "--fault-delay", "250ms", "--faults", dir_.file("f.yaml"), "--", "true"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& a = std::get<faultline::GuardArgs>(*r);
  ASSERT_EQ(a.faults.faults.size(), 3u);
  EXPECT_EQ(a.faults.faults[0].fault.name, "f1_delay");
  EXPECT_EQ(a.faults.faults[0].fault.delay_ms, 250);
  EXPECT_EQ(a.faults.faults[1].fault.name, "f2_status");
  EXPECT_EQ(a.faults.faults[1].fault.percent, 50);
  EXPECT_EQ(a.faults.faults[1].fault.match.path, "/a");
  EXPECT_EQ(a.faults.faults[2].fault.name, "f3_reset");
  EXPECT_EQ(a.faults.faults[2].target.text, "127.0.0.1:443");
  EXPECT_TRUE(a.faults.faults[2].fault.match.host.empty());  // an address: every request to it
  auto j = faultline::parse_guard_args(
      {"--terminate-tls", "--upstream-ca", dir_.file("ca.pem"), "--faults", dir_.file("f.json"), "--", "true"});
  ASSERT_TRUE(j.ok()) << j.error().message;
  const auto& b = std::get<faultline::GuardArgs>(*j);
  ASSERT_EQ(b.faults.faults.size(), 1u);
  EXPECT_TRUE(b.faults.terminate_tls);
  EXPECT_EQ(b.faults.upstream_ca, dir_.file("ca.pem"));
  EXPECT_EQ(b.faults.faults[0].fault.preset, faultline::LlmPreset::rate_limit);
  EXPECT_EQ(b.faults.faults[0].fault.provider, faultline::LlmProvider::openai);
  EXPECT_EQ(b.faults.faults[0].fault.attempts, 2);
  auto f = faultline::parse_guard_args({"--fault-host", "127.0.0.1:9", "--fault-llm", "overloaded",
                                        "--fault-llm-provider", "anthropic", "--fault-attempts", "3", "--", "true"});
  ASSERT_TRUE(f.ok()) << f.error().message;
  const auto& c = std::get<faultline::GuardArgs>(*f).faults.faults.at(0).fault;
  EXPECT_EQ(c.provider, faultline::LlmProvider::anthropic);
  EXPECT_EQ(c.attempts, 3);
}

TEST_F(GuardFaultsParse, RunHttpTlsFlagsAreCheckedByName) {
  const std::vector<BadInput> table = {
      {{"--target", "127.0.0.1:443", "--status", "503"},
       "--status on 127.0.0.1:443: a status fault needs the request's content, which TLS hides"},
      {{"--target", "127.0.0.1:8443", "--tls", "--abort-stream", "3"}, "--abort-stream on 127.0.0.1:8443"},
      {{"--target", "127.0.0.1:8443", "--tls", "--delay", "1s", "--delay-at", "response"},
       "--delay-at response on 127.0.0.1:8443: a delay before the response needs to see the response"},
      {{"--target", "127.0.0.1:8443", "--tls", "--reset", "--method", "POST"}, "--method on 127.0.0.1:8443"},
      {{"--target", "127.0.0.1:8443", "--tls", "--reset", "--attempts", "2"}, "--attempts on 127.0.0.1:8443"},
      {{"--target", "127.0.0.1:8443", "--tls", "--terminate-tls", "--reset"}, "--tls and --terminate-tls: pick one"},
      {{"--target", "127.0.0.1:8443", "--reset", "--upstream-ca", dir_.file("ca.pem")},
       "--upstream-ca needs --terminate-tls"},
      {{"--target", "127.0.0.1:8443", "--terminate-tls", "--reset", "--upstream-ca", dir_.file("not-pem.txt")},
       "--upstream-ca " + dir_.file("not-pem.txt") + ": not a readable PEM file"},
  };
  for (const auto& t : table) {
    std::vector<std::string> args = t.args;
    args.insert(args.end(), {"--duration", "10s"});
    auto r = faultline::parse_http_args(args);
    ASSERT_FALSE(r.ok()) << joined_args(t.args) << ": accepted";
    EXPECT_NE(r.error().message.find(t.says), std::string::npos)
        << joined_args(t.args) << "\n  said: " << r.error().message << "\n  want: " << t.says;
  }
  // What TLS allows without termination, and everything with it.
  for (std::vector<std::string> ok : std::vector<std::vector<std::string>>{
           {"--target", "127.0.0.1:443", "--delay", "1s", "--host", "api.example.com"},
           {"--target", "127.0.0.1:8443", "--tls", "--reset", "--percent", "10"},
           {"--target", "127.0.0.1:443", "--terminate-tls", "--upstream-ca", dir_.file("ca.pem"), "--llm",
            "overloaded"},
           {"--target", "127.0.0.1:8080", "--status", "503"}}) {
    ok.insert(ok.end(), {"--duration", "10s"});
    auto r = faultline::parse_http_args(ok);
    EXPECT_TRUE(r.ok()) << joined_args(ok) << ": " << (r.ok() ? "" : r.error().message);
  }
}

// ---- the real binary, as root ----------------------------------------------

class GuardFaultsRun : public ::testing::Test {
 protected:
  void SetUp() override {
    FL_REQUIRE_ROOT("a cgroup and cgroup BPF programs");
    auto ca = CertificateAuthority::generate();
    ASSERT_TRUE(ca.ok());
    upstream_ca_ = std::make_shared<CertificateAuthority>(std::move(*ca));
    fltest::write_file(dir_.file("upstream-ca.pem"), upstream_ca_->cert_pem());
    auto leaf = upstream_ca_->mint_leaf("api.fl.test");
    ASSERT_TRUE(leaf.ok());
    upstream_ =
        std::make_unique<fltest::HttpsUpstream>(dir_, (*leaf)->cert_pem(), fltest::private_key_pem((*leaf)->key()));
    ASSERT_TRUE(upstream_->started()) << upstream_->describe();
    port_ = std::to_string(upstream_->port());
    // A private CA folder, state folder and bpffs root for every faultctl here.
    bpffs_ = "/sys/fs/bpf/fl-guard-faults-" + std::to_string(::getpid());
    env_ = {"FAULTLINE_CA_DIR=" + dir_.file("ca"), "FAULTLINE_RUN_DIR=" + dir_.file("run"),
            "FAULTLINE_BPFFS_ROOT=" + bpffs_, "SSL_CERT_FILE=", "CURL_CA_BUNDLE="};
  }
  void TearDown() override { fltest::remove_test_bpffs_root(bpffs_); }

  CommandResult faultctl(std::vector<std::string> args) {
    args.insert(args.begin(), FAULTCTL_PATH);
    return fltest::run_command(args, {.env = env_}, 60s);
  }

  // curl inside the guard: api.fl.test is 127.0.0.1; what it trusts comes
  // from the guard (or --cacert in extra).
  std::vector<std::string> curl(const std::vector<std::string>& paths, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {"curl",       "-sS",
                                     "--max-time", "10",
                                     "--resolve",  "api.fl.test:" + port_ + ":127.0.0.1",
                                     "-w",         "[%{http_code}]\\n"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (const auto& p : paths) argv.push_back("https://api.fl.test:" + port_ + p);
    return argv;
  }

  fltest::TempDir dir_;
  std::shared_ptr<CertificateAuthority> upstream_ca_;
  std::unique_ptr<fltest::HttpsUpstream> upstream_;
  std::string port_;
  std::string bpffs_;
  std::vector<std::string> env_;
};

TEST_F(GuardFaultsRun, TerminatedStatusFaultSeenByCurlTrustingOnlyWhatTheGuardHandsIt) {
  std::vector<std::string> args = {"guard",
                                   "--terminate-tls",
                                   "--upstream-ca",
                                   dir_.file("upstream-ca.pem"),
                                   "--fault-host",
                                   "127.0.0.1:" + port_,
                                   "--fault-path",
                                   "/fail",
                                   "--fault-status",
                                   "503",
                                   "--"};
  // curl reads CURL_CA_BUNDLE, which the guard sets (the test's env empties it).
  for (const auto& a : curl({"/hello", "/fail"})) args.push_back(a);
  auto r = faultctl(args);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("hello from upstream /hello[200]"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("[503]"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("the command trusts it through NODE_EXTRA_CA_CERTS SSL_CERT_FILE REQUESTS_CA_BUNDLE "
                       "CURL_CA_BUNDLE"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("f1_status  1"), std::string::npos) << r.err;
  EXPECT_EQ(upstream_->requests(), 1);
  // The trust files were the run's: gone with it.
  EXPECT_EQ(r.err.find("/tmp/faultline-guard-tls"), std::string::npos);
}

// python's urllib (SSL_CERT_FILE) and node (NODE_EXTRA_CA_CERTS) trust the CA
// through the variables the guard sets, and nothing else of the test's.
TEST_F(GuardFaultsRun, PythonUrllibAndNodeTrustTheCaThroughTheVariables) {
  const std::string url = "https://api.fl.test:" + port_;
  const std::string py =
      "import socket, sys, urllib.request, urllib.error\n"
      "real = socket.getaddrinfo\n"
      "socket.getaddrinfo = lambda h, *a, **k: real('127.0.0.1' if h == 'api.fl.test' else h, *a, **k)\n"
      "for p in ('/fail', '/ok'):\n"
      "    try:\n"
      "        r = urllib.request.urlopen(sys.argv[1] + p, timeout=10)\n"
      "        print('python', r.status, r.read().decode())\n"
      "    except urllib.error.HTTPError as e:\n"
      "        print('python', e.code)\n";
  const std::string js =
      "const https = require('https');\n"
      "const get = (p) => new Promise((ok, no) => https.get({host: '127.0.0.1', port: process.argv[1], path: p,\n"
      "  servername: 'api.fl.test', headers: {Host: 'api.fl.test'}}, (r) => { let b = '';\n"
      "  r.on('data', (d) => b += d); r.on('end', () => ok(r.statusCode + ' ' + b)); }).on('error', no));\n"
      "(async () => { for (const p of ['/fail', '/ok']) console.log('node', await get(p)); })()\n"
      "  .catch((e) => { console.log('node error', e.code || e.message); process.exit(1); });\n";
  auto r = faultctl({"guard", "--terminate-tls", "--upstream-ca", dir_.file("upstream-ca.pem"), "--fault-host",
                     "127.0.0.1:" + port_, "--fault-path", "/fail", "--fault-status", "503", "--", "sh", "-c",
                     "python3 -c \"$1\" \"$2\" && node -e \"$3\" \"$4\"", "sh", py, url, js, port_});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("python 503\npython 200 hello from upstream /ok\n"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("node 503 \nnode 200 hello from upstream /ok\n"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("f1_status  2"), std::string::npos) << r.err;
  EXPECT_EQ(upstream_->requests(), 2);
}

TEST_F(GuardFaultsRun, PassThroughDelayBySniIsMeasured) {
  std::vector<std::string> args = {"guard", "--fault-host", "127.0.0.1:" + port_, "--fault-delay", "1s", "--"};
  for (const auto& a : curl({"/slow"}, {"--cacert", dir_.file("upstream-ca.pem")})) args.push_back(a);
  args[args.size() - 4] = "[%{http_code}]\\n%{time_total}\\n";  // the -w of curl()
  const auto t0 = std::chrono::steady_clock::now();
  auto r = faultctl(args);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("hello from upstream /slow[200]"), std::string::npos) << r.describe();
  const double curl_s = std::stod(r.out.substr(r.out.rfind("]\n") + 2));
  EXPECT_GE(curl_s, 1.0) << r.out;
  EXPECT_LT(curl_s, took);
  EXPECT_NE(r.err.find("f1_delay  1"), std::string::npos) << r.err;
}

TEST_F(GuardFaultsRun, FaultsFileAppliesEachFaultToItsRequests) {
  fltest::write_file(dir_.file("faults.yaml"),
                     "faults:\n"
                     "  - host: 127.0.0.1:" +
                         port_ +
                         "\n"
                         "    path: /bad-gateway\n"
                         "    status: 502\n"
                         "  - host: 127.0.0.1:" +
                         port_ +
                         "\n"
                         "    path: /v1/messages\n"
                         "    llm: overloaded\n");
  std::vector<std::string> args = {
      "guard", "--terminate-tls", "--upstream-ca", dir_.file("upstream-ca.pem"), "--faults", dir_.file("faults.yaml"),
      "--"};
  for (const auto& a : curl({"/bad-gateway", "/v1/messages", "/fine"})) args.push_back(a);
  auto r = faultctl(args);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("[502]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"overloaded_error\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[529]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hello from upstream /fine[200]"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("f1_status  1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("f2_llm_overloaded  1"), std::string::npos) << r.err;
  EXPECT_EQ(upstream_->requests(), 1);
}

TEST_F(GuardFaultsRun, ADeniedDestinationIsDeniedNeverFaulted) {
  std::vector<std::string> args = {"guard",
                                   "--enforce",
                                   "--deny",
                                   "127.0.0.1/32:" + port_,
                                   "--deny-errno",
                                   "ECONNREFUSED",
                                   "--terminate-tls",
                                   "--upstream-ca",
                                   dir_.file("upstream-ca.pem"),
                                   "--fault-host",
                                   "127.0.0.1:" + port_,
                                   "--fault-status",
                                   "503",
                                   "--"};
  for (const auto& a : curl({"/denied"})) args.push_back(a);
  auto r = faultctl(args);
  EXPECT_TRUE(r.status.is(7)) << r.describe();  // curl: could not connect
  EXPECT_EQ(r.out.find("[503]"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("-> deny"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("-> redirect"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("f1_status  0"), std::string::npos) << r.err;
  EXPECT_EQ(upstream_->requests(), 0);
}

TEST_F(GuardFaultsRun, BadFaultFlagsExitTwoWithNothingMade) {
  auto r = faultctl({"guard", "--fault-host", "127.0.0.1", "--fault-status", "503", "--", "true"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("faultctl guard: --fault-status on 127.0.0.1:443"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("ca")));  // no CA made
  EXPECT_FALSE(std::filesystem::exists(bpffs_));           // nothing pinned
}

TEST_F(GuardFaultsRun, RunHttpTerminatesAndHandsTheCommandTheCa) {
  std::vector<std::string> args = {"run",
                                   "http",
                                   "--target",
                                   "127.0.0.1:" + port_,
                                   "--terminate-tls",
                                   "--upstream-ca",
                                   dir_.file("upstream-ca.pem"),
                                   "--path",
                                   "/fail",
                                   "--status",
                                   "503",
                                   "--duration",
                                   "30s",
                                   "--"};
  for (const auto& a : curl({"/fail", "/ok"})) args.push_back(a);
  auto r = faultctl(args);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("[503]"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("hello from upstream /ok[200]"), std::string::npos) << r.describe();
  EXPECT_EQ(upstream_->requests(), 1);
}

}  // namespace
