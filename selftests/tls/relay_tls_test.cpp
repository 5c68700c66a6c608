// TLS in the relay, with real clients on loopback through a ProxyRegistry in
// HTTP mode in front of an HTTPS upstream (python3): pass-through connections
// faulted by their SNI (a delay measured, a reset seen as ECONNRESET, the bytes
// untouched: the client verifies the upstream's own certificate), plain HTTP
// still parsed with TLS on, and termination with HTTP faults on the plaintext
// (curl trusting only our CA), an upstream naming another host refused.
#include <gtest/gtest.h>

#include <chrono>

#include "selftests/tls/tls_harness.h"
#include "userspace/proxy/proxy_registry.h"
#include "userspace/proxy/tls_leaf_cache.h"

namespace {

using faultline::CertificateAuthority;
using faultline::HttpFault;
using faultline::HttpFaultType;
using faultline::HttpTls;
using faultline::HttpTlsMode;
using faultline::ProxyRegistry;
using fltest::CommandResult;
using namespace std::chrono_literals;

class RelayTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ours = CertificateAuthority::generate();
    auto theirs = CertificateAuthority::generate();
    ASSERT_TRUE(ours.ok() && theirs.ok());
    our_ca_ = std::make_shared<CertificateAuthority>(std::move(*ours));
    upstream_ca_ = std::make_shared<CertificateAuthority>(std::move(*theirs));
    fltest::write_file(dir_.file("our-ca.pem"), our_ca_->cert_pem());
    fltest::write_file(dir_.file("upstream-ca.pem"), upstream_ca_->cert_pem());
  }

  void start(const std::string& cert_host, HttpTlsMode mode, faultline::ReceiveMode receive = {}) {
    auto leaf = upstream_ca_->mint_leaf(cert_host);
    ASSERT_TRUE(leaf.ok());
    upstream_ =
        std::make_unique<fltest::HttpsUpstream>(dir_, (*leaf)->cert_pem(), fltest::private_key_pem((*leaf)->key()));
    ASSERT_TRUE(upstream_->started()) << upstream_->describe();
    faultline::ProxyOptions po;
    po.workers = 1;
    po.receive = receive;
    auto reg = ProxyRegistry::start(po);
    ASSERT_TRUE(reg.ok()) << reg.error().describe();
    proxies_ = std::move(*reg);
    faultline::ProxyConfig pc;
    pc.name = "tls";
    pc.listen = "127.0.0.1:0";
    pc.upstream = "127.0.0.1:" + std::to_string(upstream_->port());
    auto info = proxies_->create(pc);
    ASSERT_TRUE(info.ok()) << info.error().describe();
    port_ = info->listen_bound.substr(info->listen_bound.rfind(':') + 1);
    HttpTls tls;
    tls.mode = mode;
    if (mode == HttpTlsMode::terminate) {
      auto server = faultline::TlsServerContext::create(std::make_shared<faultline::LeafCache>(our_ca_));
      ASSERT_TRUE(server.ok()) << server.error().describe();
      faultline::TlsClientOptions o;
      o.upstream_ca_file = dir_.file("upstream-ca.pem");
      auto client = faultline::TlsClientContext::create(o);
      ASSERT_TRUE(client.ok()) << client.error().describe();
      tls.server = *server;
      tls.client = *client;
    }
    ASSERT_TRUE(proxies_->set_http_tls("tls", tls).ok());
  }

  void add(HttpFault f) {
    if (f.name.empty()) f.name = std::string(faultline::http_fault_type_name(f.type)) + std::to_string(++faults_);
    auto added = proxies_->add_http_fault("tls", f);
    ASSERT_TRUE(added.ok()) << added.error().describe();
  }

  // curl to https://HOST:PORT/PATH through the proxy, trusting only `ca`.
  CommandResult curl(const std::string& host, const std::string& ca, std::vector<std::string> paths,
                     std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {"curl",       "-sS",
                                     "--max-time", "10",
                                     "--resolve",  host + ":" + port_ + ":127.0.0.1",
                                     "-w",         "[%{http_code}]\\n",
                                     "--cacert",   ca};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (const auto& p : paths) argv.push_back("https://" + host + ":" + port_ + p);
    return fltest::run_command(argv, {.env = {"SSL_CERT_FILE=", "CURL_CA_BUNDLE="}}, 20s);
  }

  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  fltest::TempDir dir_;
  std::shared_ptr<CertificateAuthority> our_ca_, upstream_ca_;
  std::unique_ptr<fltest::HttpsUpstream> upstream_;
  std::unique_ptr<ProxyRegistry> proxies_;
  std::string port_;
  int faults_ = 0;
};

HttpFault delay_fault(const std::string& host, int64_t ms) {
  HttpFault f;
  f.type = HttpFaultType::delay;
  f.delay_ms = ms;
  f.match.host = host;
  return f;
}

TEST_F(RelayTlsTest, SniDelayHoldsOnlyTheMatchingNameAndPassesTheBytesUntouched) {
  start("api.fl.test", HttpTlsMode::sni);
  add(delay_fault("other.fl.test", 800));  // another name: not this connection
  auto t0 = std::chrono::steady_clock::now();
  // The client verifies the upstream's own certificate: the bytes are the upstream's.
  auto fast = curl("api.fl.test", dir_.file("upstream-ca.pem"), {"/fast"});
  const double fast_s = seconds_since(t0);
  ASSERT_TRUE(fast.status.is(0)) << fast.describe();
  EXPECT_EQ(fast.out, "hello from upstream /fast[200]\n");
  EXPECT_LT(fast_s, 0.7);

  add(delay_fault("API.fl.test:443", 800));  // with a port: the destination's (the upstream's), not 443
  add(delay_fault("api.fl.test", 800));
  t0 = std::chrono::steady_clock::now();
  auto slow = curl("api.fl.test", dir_.file("upstream-ca.pem"), {"/slow"});
  const double slow_s = seconds_since(t0);
  ASSERT_TRUE(slow.status.is(0)) << slow.describe();
  EXPECT_EQ(slow.out, "hello from upstream /slow[200]\n");
  EXPECT_GE(slow_s, 0.8);
  EXPECT_LT(slow_s, 3.0);
  auto st = proxies_->stats("tls");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->http_faults.size(), 3u);
  EXPECT_EQ(st->http_faults[0].connections, 0u);
  EXPECT_EQ(st->http_faults[1].connections, 0u);
  EXPECT_EQ(st->http_faults[2].connections, 1u);
  EXPECT_EQ(upstream_->requests(), 2);
}

TEST_F(RelayTlsTest, SniResetIsEconnresetForTheClientAndReachesNoUpstreamRequest) {
  start("api.fl.test", HttpTlsMode::sni, faultline::ReceiveMode::plain);
  HttpFault f;
  f.type = HttpFaultType::reset;
  f.match.host = "api.fl.test";
  add(f);
  const std::string script =
      "import socket, ssl, sys\n"
      "ctx = ssl.create_default_context(cafile=sys.argv[2])\n"
      "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
      "try:\n"
      "    ctx.wrap_socket(s, server_hostname='api.fl.test')\n"
      "    print('handshake completed')\n"
      "except ConnectionResetError as e:\n"
      "    print('ECONNRESET' if e.errno == 104 else e)\n"
      "except Exception as e:\n"
      "    print(type(e).__name__, e)\n";
  auto r = fltest::run_command({"python3", "-c", script, port_, dir_.file("upstream-ca.pem")}, {}, 20s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "ECONNRESET\n");
  // curl says the same in its words.
  auto c = curl("api.fl.test", dir_.file("upstream-ca.pem"), {"/x"});
  EXPECT_TRUE(c.status.is(35)) << c.describe();
  EXPECT_NE(c.err.find("reset"), std::string::npos) << c.describe();
  EXPECT_EQ(upstream_->requests(), 0);
}

TEST_F(RelayTlsTest, PlainHttpIsStillParsedWhenTlsIsOn) {
  start("api.fl.test", HttpTlsMode::sni);
  HttpFault f;
  f.type = HttpFaultType::status;
  f.status = 503;
  f.body = "down\n";
  f.match.path = "/plain";
  add(f);
  auto r = fltest::run_command(
      {"curl", "-sS", "--max-time", "10", "-w", "[%{http_code}]", "http://127.0.0.1:" + port_ + "/plain"}, {}, 20s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "down\n[503]");
}

TEST_F(RelayTlsTest, TerminatedStatusAndLlmFaultsSeenByCurlTrustingOnlyOurCa) {
  for (auto receive : {faultline::ReceiveMode::automatic, faultline::ReceiveMode::plain}) {
    SCOPED_TRACE(receive == faultline::ReceiveMode::plain ? "plain receive" : "automatic receive");
    start("api.fl.test", HttpTlsMode::terminate, receive);
    HttpFault status;
    status.type = HttpFaultType::status;
    status.status = 503;
    status.body = "faulted\n";
    status.match.path = "/fail";
    add(status);
    HttpFault llm;
    llm.type = HttpFaultType::llm;
    llm.preset = faultline::LlmPreset::overloaded;
    llm.provider = faultline::LlmProvider::anthropic;
    llm.match.path = "/v1/messages";
    add(llm);
    // One keep-alive connection: clean, faulted, clean, each judged on its own.
    auto r = curl("api.fl.test", dir_.file("our-ca.pem"), {"/hello", "/fail", "/again"}, {"-v"});
    ASSERT_TRUE(r.status.is(0)) << r.describe();
    EXPECT_EQ(r.out, "hello from upstream /hello[200]\nfaulted\n[503]\nhello from upstream /again[200]\n");
    EXPECT_NE(r.err.find("Re-using existing connection"), std::string::npos);
    auto m = curl("api.fl.test", dir_.file("our-ca.pem"), {"/v1/messages"}, {"--data-binary", "{}"});
    ASSERT_TRUE(m.status.is(0)) << m.describe();
    EXPECT_NE(m.out.find("\"overloaded_error\""), std::string::npos) << m.out;
    EXPECT_NE(m.out.find("[529]"), std::string::npos) << m.out;
    // A body through termination, and the upstream saw only the clean requests.
    auto post = curl("api.fl.test", dir_.file("our-ca.pem"), {"/echo"}, {"--data-binary", std::string(100000, 'x')});
    ASSERT_TRUE(post.status.is(0)) << post.describe();
    EXPECT_EQ(post.out, std::string(100000, 'x') + "[200]\n");
    EXPECT_EQ(upstream_->requests(), 3);
    // A client that trusts the upstream's root, not ours, fails closed.
    auto refused = curl("api.fl.test", dir_.file("upstream-ca.pem"), {"/hello"});
    EXPECT_TRUE(refused.status.is(60)) << refused.describe();
    EXPECT_EQ(upstream_->requests(), 3);
    proxies_.reset();
    upstream_.reset();
  }
}

TEST_F(RelayTlsTest, TerminatedTruncateCutsTheDecryptedResponse) {
  start("api.fl.test", HttpTlsMode::terminate);
  HttpFault f;
  f.type = HttpFaultType::truncate;
  f.bytes = 10;
  add(f);
  auto r = curl("api.fl.test", dir_.file("our-ca.pem"), {"/truncated"});
  EXPECT_FALSE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out.substr(0, 10), "hello from");
  EXPECT_EQ(r.out.find("upstream"), std::string::npos) << r.out;
}

TEST_F(RelayTlsTest, TerminationRefusesAnUpstreamNamingAnotherHost) {
  start("wrong.fl.test", HttpTlsMode::terminate);
  auto r = curl("api.fl.test", dir_.file("our-ca.pem"), {"/hello"});
  EXPECT_TRUE(r.status.is(35)) << r.describe();
  EXPECT_NE(r.err.find("handshake failure"), std::string::npos) << r.describe();
  EXPECT_EQ(upstream_->requests(), 0);
}

}  // namespace
