// TLS termination with real clients on loopback: curl and python's urllib get
// the upstream's answer through a leaf of our CA; a client that does not trust
// our CA, or pins the upstream's key, fails closed; an upstream whose
// certificate names another host, or chains to no trusted root, is refused and
// never reached by a request. Sessions are also paired in memory, no sockets.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "selftests/tls/tls_harness.h"
#include "userspace/proxy/tls_leaf_cache.h"
#include "userspace/proxy/tls_setup.h"
#include "userspace/proxy/tls_termination.h"
#include "userspace/proxy/tls_trust_env.h"

namespace {

using faultline::CertificateAuthority;
using faultline::TlsClientContext;
using faultline::TlsServerContext;
using faultline::TlsSession;
using faultline::TlsState;
using fltest::CommandResult;
using namespace std::chrono_literals;

// Our CA (what termination mints with) and an upstream's private CA.
class TerminationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ours = CertificateAuthority::generate();
    auto theirs = CertificateAuthority::generate();
    ASSERT_TRUE(ours.ok() && theirs.ok());
    our_ca_ = std::make_shared<CertificateAuthority>(std::move(*ours));
    upstream_ca_ = std::make_shared<CertificateAuthority>(std::move(*theirs));
    fltest::write_file(dir_.file("our-ca.pem"), our_ca_->cert_pem());
    fltest::write_file(dir_.file("upstream-ca.pem"), upstream_ca_->cert_pem());
    auto server = TlsServerContext::create(std::make_shared<faultline::LeafCache>(our_ca_));
    ASSERT_TRUE(server.ok()) << server.error().describe();
    server_ctx_ = *server;
  }

  // An upstream serving a certificate for cert_host, signed by signer.
  void start_upstream(const std::string& cert_host, const CertificateAuthority& signer) {
    auto leaf = signer.mint_leaf(cert_host);
    ASSERT_TRUE(leaf.ok());
    upstream_ =
        std::make_unique<fltest::HttpsUpstream>(dir_, (*leaf)->cert_pem(), fltest::private_key_pem((*leaf)->key()));
    ASSERT_TRUE(upstream_->started()) << upstream_->describe();
    upstream_leaf_ = *leaf;
  }

  // The terminator, trusting the upstream's CA through upstream_ca (or not).
  void start_terminator(bool trust_upstream_ca = true) {
    faultline::TlsClientOptions o;
    if (trust_upstream_ca) o.upstream_ca_file = dir_.file("upstream-ca.pem");
    auto client = TlsClientContext::create(o);
    ASSERT_TRUE(client.ok()) << client.error().describe();
    terminator_ = std::make_unique<fltest::LoopbackTerminator>(server_ctx_, *client, upstream_->port());
  }

  CommandResult curl(const std::string& host, std::vector<std::string> extra) {
    const std::string port = std::to_string(terminator_->port());
    std::vector<std::string> argv = {
        "curl", "-sS", "--max-time", "10", "--resolve", host + ":" + port + ":127.0.0.1", "-w", "\\n%{http_version}"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("https://" + host + ":" + port + "/hello");
    // No inherited trust settings: the test says what curl trusts.
    return fltest::run_command(argv, {.env = {"SSL_CERT_FILE=", "CURL_CA_BUNDLE="}}, 20s);
  }

  fltest::TempDir dir_;
  std::shared_ptr<CertificateAuthority> our_ca_, upstream_ca_;
  std::shared_ptr<TlsServerContext> server_ctx_;
  std::shared_ptr<const faultline::LeafCertificate> upstream_leaf_;
  std::unique_ptr<fltest::HttpsUpstream> upstream_;
  std::unique_ptr<fltest::LoopbackTerminator> terminator_;
};

TEST_F(TerminationTest, CurlTrustingOurCaGetsTheUpstreamAnswerOverHttp11) {
  start_upstream("api.fl.test", *upstream_ca_);
  start_terminator();
  auto r = curl("api.fl.test", {"--cacert", dir_.file("our-ca.pem")});
  ASSERT_TRUE(r.status.is(0)) << r.describe()
                              << "\nterminator errors: " << ::testing::PrintToString(terminator_->errors());
  // curl offers h2 and http/1.1; termination answers http/1.1 only.
  EXPECT_EQ(r.out, "hello from upstream /hello\n1.1");
  EXPECT_EQ(upstream_->requests(), 1);
  EXPECT_EQ(terminator_->alpns(), std::vector<std::string>{"http/1.1"});

  // A body goes through too, and a second connection reuses the cached leaf.
  auto post = curl("api.fl.test", {"--cacert", dir_.file("our-ca.pem"), "--data-binary", "ping-pong-body"});
  ASSERT_TRUE(post.status.is(0)) << post.describe();
  EXPECT_EQ(post.out, "ping-pong-body\n1.1");
  EXPECT_EQ(server_ctx_->leaves().stats().mints, 1u);
  EXPECT_EQ(server_ctx_->leaves().stats().hits, 1u);
}

TEST_F(TerminationTest, Tls12ClientAndAClientWithoutSni) {
  start_upstream("127.0.0.1", *upstream_ca_);  // an IP SAN: what a client by address checks
  start_terminator();
  const std::string url = "https://127.0.0.1:" + std::to_string(terminator_->port()) + "/by-address";
  // curl sends no SNI for an address: the leaf and the upstream check use the
  // connection's destination (the harness's fallback_host, 127.0.0.1).
  auto r = fltest::run_command({"curl", "-sS", "--max-time", "10", "--cacert", dir_.file("our-ca.pem"), url},
                               {.env = {"SSL_CERT_FILE=", "CURL_CA_BUNDLE="}}, 20s);
  ASSERT_TRUE(r.status.is(0)) << r.describe()
                              << "\nterminator errors: " << ::testing::PrintToString(terminator_->errors());
  EXPECT_EQ(r.out, "hello from upstream /by-address");
  auto tls12 = fltest::run_command(
      {"curl", "-sSv", "--max-time", "10", "--tls-max", "1.2", "--cacert", dir_.file("our-ca.pem"), url},
      {.env = {"SSL_CERT_FILE=", "CURL_CA_BUNDLE="}}, 20s);
  ASSERT_TRUE(tls12.status.is(0)) << tls12.describe();
  EXPECT_NE(tls12.err.find("SSL connection using TLSv1.2"), std::string::npos) << tls12.err;
  EXPECT_EQ(upstream_->requests(), 2);
}

TEST_F(TerminationTest, PythonUrllibThroughTheTrustEnvironment) {
  start_upstream("localhost", *upstream_ca_);
  start_terminator();
  auto files = faultline::write_trust_files(dir_.path(), our_ca_->cert_pem());
  ASSERT_TRUE(files.ok()) << files.error().describe();
  std::vector<std::string> env;
  for (const auto& [k, v] : faultline::trust_environment(*files)) env.push_back(k + "=" + v);
  const std::string url = "https://localhost:" + std::to_string(terminator_->port()) + "/py";
  auto r = fltest::run_command(
      {"python3", "-c",
       "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())", url},
      {.env = env}, 20s);
  ASSERT_TRUE(r.status.is(0)) << r.describe()
                              << "\nterminator errors: " << ::testing::PrintToString(terminator_->errors());
  EXPECT_EQ(r.out, "hello from upstream /py\n");

  // The same client without the environment trusts the system store alone: refused.
  auto bare = fltest::run_command(
      {"python3", "-c", "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)", url},
      {.env = {"SSL_CERT_FILE="}}, 20s);
  EXPECT_FALSE(bare.status.is(0)) << bare.describe();
  EXPECT_NE(bare.err.find("CERTIFICATE_VERIFY_FAILED"), std::string::npos) << bare.describe();
  EXPECT_EQ(upstream_->requests(), 1);
}

TEST_F(TerminationTest, SetUpFromNothingThenCurlWithTheVariablesAlone) {
  start_upstream("api.fl.test", *upstream_ca_);
  faultline::TerminationOptions o;
  o.ca.dir = dir_.file("state/ca");  // no CA yet: created on first use
  o.trust_dir = dir_.path();
  o.upstream.upstream_ca_file = dir_.file("upstream-ca.pem");
  auto setup = faultline::set_up_termination(o);
  ASSERT_TRUE(setup.ok()) << setup.error().describe();
  EXPECT_TRUE(setup->ca_created);
  EXPECT_EQ(setup->ca.key_type, "EC P-256");
  terminator_ = std::make_unique<fltest::LoopbackTerminator>(setup->server, setup->client, upstream_->port());
  std::vector<std::string> env;
  for (const auto& [k, v] : setup->env) env.push_back(k + "=" + v);
  const std::string port = std::to_string(terminator_->port());
  // No --cacert: curl finds the bundle through CURL_CA_BUNDLE, as a wrapped command would.
  auto r = fltest::run_command({"curl", "-sS", "--max-time", "10", "--resolve", "api.fl.test:" + port + ":127.0.0.1",
                                "https://api.fl.test:" + port + "/env"},
                               {.env = env}, 20s);
  ASSERT_TRUE(r.status.is(0)) << r.describe()
                              << "\nterminator errors: " << ::testing::PrintToString(terminator_->errors());
  EXPECT_EQ(r.out, "hello from upstream /env");

  // The second run finds the CA; a bad --upstream-ca is named, before any file is written.
  auto again = faultline::set_up_termination(o);
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_FALSE(again->ca_created);
  EXPECT_EQ(again->ca.sha256_fingerprint, setup->ca.sha256_fingerprint);
  o.upstream.upstream_ca_file = dir_.file("missing.pem");
  o.trust_dir = dir_.file("never-written");
  auto bad = faultline::set_up_termination(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.error().bad_input);
  EXPECT_NE(bad.error().message.find("TLS termination: upstream_ca " + dir_.file("missing.pem")), std::string::npos)
      << bad.error().message;
}

TEST_F(TerminationTest, ClientNotTrustingOurCaFailsClosed) {
  start_upstream("api.fl.test", *upstream_ca_);
  start_terminator();
  // The system store only: our leaf is unknown to it.
  auto r = curl("api.fl.test", {});
  EXPECT_TRUE(r.status.is(60)) << r.describe();  // CURLE_PEER_FAILED_VERIFICATION
  // Trusting the upstream's own CA is no bypass either: the leaf it sees is ours.
  auto wrong_root = curl("api.fl.test", {"--cacert", dir_.file("upstream-ca.pem")});
  EXPECT_TRUE(wrong_root.status.is(60)) << wrong_root.describe();
  // A client pinning the upstream's key refuses our leaf even when it trusts our CA.
  auto pinned = curl("api.fl.test", {"--cacert", dir_.file("our-ca.pem"), "--pinnedpubkey",
                                     fltest::pinned_pubkey(upstream_leaf_->cert())});
  EXPECT_TRUE(pinned.status.is(90)) << pinned.describe();  // CURLE_SSL_PINNEDPUBKEYNOTMATCH
  EXPECT_EQ(upstream_->requests(), 0) << "no request may reach the upstream";
  EXPECT_TRUE(terminator_->wait_error("client: ")) << ::testing::PrintToString(terminator_->errors());
}

TEST_F(TerminationTest, UpstreamCertificateForAnotherHostIsRefused) {
  start_upstream("other.fl.test", *upstream_ca_);
  start_terminator();
  auto r = curl("api.fl.test", {"--cacert", dir_.file("our-ca.pem")});
  EXPECT_TRUE(r.status.is(35)) << r.describe();  // CURLE_SSL_CONNECT_ERROR: our alert
  EXPECT_NE(r.err.find("handshake failure"), std::string::npos) << r.describe();
  EXPECT_TRUE(terminator_->wait_error("upstream api.fl.test: certificate refused: hostname mismatch"))
      << ::testing::PrintToString(terminator_->errors());
  EXPECT_EQ(upstream_->requests(), 0);
}

TEST_F(TerminationTest, UpstreamWithoutATrustedRootIsRefused) {
  start_upstream("api.fl.test", *upstream_ca_);
  start_terminator(/*trust_upstream_ca=*/false);  // the system store alone
  auto r = curl("api.fl.test", {"--cacert", dir_.file("our-ca.pem")});
  EXPECT_TRUE(r.status.is(35)) << r.describe();
  EXPECT_TRUE(terminator_->wait_error("upstream api.fl.test: certificate refused: unable to get local issuer"))
      << ::testing::PrintToString(terminator_->errors());
  EXPECT_EQ(upstream_->requests(), 0);
}

TEST(TlsClientContextTest, UnreadableUpstreamCaIsBadInput) {
  auto r = TlsClientContext::create({.upstream_ca_file = "/nonexistent/ca.pem"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().bad_input);
  EXPECT_NE(r.error().message.find("upstream_ca /nonexistent/ca.pem: not a readable PEM file"), std::string::npos)
      << r.error().message;
}

// Two sessions shuttled in memory: the handshake, plaintext both ways, close_notify.
class SessionPair : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = CertificateAuthority::generate();
    ASSERT_TRUE(ca.ok());
    ca_ = std::make_shared<CertificateAuthority>(std::move(*ca));
    fltest::write_file(dir_.file("ca.pem"), ca_->cert_pem());
    auto server = TlsServerContext::create(std::make_shared<faultline::LeafCache>(ca_));
    auto client = TlsClientContext::create({.upstream_ca_file = dir_.file("ca.pem")});
    ASSERT_TRUE(server.ok() && client.ok());
    server_ctx_ = *server;
    client_ctx_ = *client;
  }

  // Moves bytes both ways until neither side has any to send. Byte by byte when
  // trickle: every record split at every position.
  static void shuttle(TlsSession& c, TlsSession& s, bool trickle = false) {
    for (int round = 0; round < 50 && (c.has_ciphertext() || s.has_ciphertext()); ++round) {
      for (auto [from, to] : {std::pair{&c, &s}, std::pair{&s, &c}}) {
        const std::string bytes = from->take_ciphertext();
        if (!trickle) {
          (void)to->feed_ciphertext(bytes);
          continue;
        }
        for (char b : bytes) (void)to->feed_ciphertext(std::string_view(&b, 1));
      }
    }
  }

  fltest::TempDir dir_;
  std::shared_ptr<CertificateAuthority> ca_;
  std::shared_ptr<TlsServerContext> server_ctx_;
  std::shared_ptr<TlsClientContext> client_ctx_;
};

TEST_F(SessionPair, HandshakeDataAndCloseInMemory) {
  for (bool trickle : {false, true}) {
    auto c = TlsSession::client(client_ctx_, "mem.fl.test");
    auto s = TlsSession::server(server_ctx_);
    ASSERT_TRUE(c.ok() && s.ok());
    ASSERT_TRUE((*c)->send_plaintext("early request").ok());  // queued until established
    shuttle(**c, **s, trickle);
    ASSERT_EQ((*c)->state(), TlsState::kEstablished) << (*c)->error();
    ASSERT_EQ((*s)->state(), TlsState::kEstablished) << (*s)->error();
    EXPECT_EQ((*s)->server_name(), "mem.fl.test");
    EXPECT_EQ((*s)->alpn(), "http/1.1");
    EXPECT_EQ((*c)->alpn(), "http/1.1");
    EXPECT_EQ((*c)->protocol(), "TLSv1.3");
    EXPECT_EQ((*s)->take_plaintext(), "early request");
    const std::string big(200000, 'x');
    ASSERT_TRUE((*s)->send_plaintext(big).ok());
    shuttle(**c, **s, false);
    EXPECT_EQ((*c)->take_plaintext(), big);
    (*c)->close();
    shuttle(**c, **s, trickle);
    EXPECT_EQ((*s)->state(), TlsState::kClosed);
    EXPECT_FALSE((*s)->send_plaintext("late").ok());
  }
}

TEST_F(SessionPair, ClientOfferingOnlyH2IsRefusedByName) {
  // A raw OpenSSL client: our own client session always offers http/1.1.
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  const unsigned char h2[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx, h2, sizeof(h2));
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  SSL_set_tlsext_host_name(ssl, "h2.fl.test");
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);
  char* data = nullptr;
  const long n = BIO_get_mem_data(out, &data);
  auto s = TlsSession::server(server_ctx_);
  ASSERT_TRUE(s.ok());
  auto st = (*s)->feed_ciphertext(std::string_view(data, static_cast<size_t>(n)));
  EXPECT_FALSE(st.ok());
  EXPECT_EQ((*s)->state(), TlsState::kFailed);
  EXPECT_NE((*s)->error().find("offered ALPN h2 without http/1.1"), std::string::npos) << (*s)->error();
  EXPECT_TRUE((*s)->has_ciphertext()) << "the client is told: an alert";
  SSL_free(ssl);
  SSL_CTX_free(ctx);
}

TEST_F(SessionPair, NoSniAndNoFallbackIsRefused) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, BIO_new(BIO_s_mem()), out);
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);
  char* data = nullptr;
  const long n = BIO_get_mem_data(out, &data);
  auto s = TlsSession::server(server_ctx_);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)->feed_ciphertext(std::string_view(data, static_cast<size_t>(n))).ok());
  EXPECT_NE((*s)->error().find("sent no server name (SNI)"), std::string::npos) << (*s)->error();
  SSL_free(ssl);
  SSL_CTX_free(ctx);
}

// TlsTermination between a client session and an upstream session, in memory:
// every byte each side has is moved until nothing moves.
void pump(TlsSession& client, faultline::TlsTermination& t, TlsSession* upstream) {
  for (int round = 0; round < 50; ++round) {
    bool moved = false;
    if (std::string b = client.take_ciphertext(); !b.empty()) {
      moved = true;
      (void)t.from_client(b);
    }
    if (std::string b = t.to_client(); !b.empty()) {
      moved = true;
      (void)client.feed_ciphertext(b);
    }
    if (upstream != nullptr) {
      if (std::string b = t.to_upstream(); !b.empty()) {
        moved = true;
        (void)upstream->feed_ciphertext(b);
      }
      if (std::string b = upstream->take_ciphertext(); !b.empty()) {
        moved = true;
        (void)t.from_upstream(b);
      }
    }
    if (!moved) return;
  }
}

using Phase = faultline::TlsTermination::Phase;

TEST_F(SessionPair, TerminationPhasesInMemory) {
  faultline::TlsTermination t(server_ctx_, client_ctx_);
  auto c = TlsSession::client(client_ctx_, "mem.fl.test");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(t.upstream_connected().ok()) << "not before the hello";
  pump(**c, t, nullptr);
  ASSERT_EQ(t.phase(), Phase::kConnectUpstream) << t.error();
  EXPECT_EQ(t.upstream_host(), "mem.fl.test");
  EXPECT_EQ((*c)->state(), TlsState::kHandshaking) << "the client is not answered before the upstream is verified";
  auto u = TlsSession::server(server_ctx_);  // the upstream: a leaf of the CA client_ctx_ trusts
  ASSERT_TRUE(u.ok());
  ASSERT_TRUE(t.upstream_connected().ok());
  pump(**c, t, u->get());
  ASSERT_EQ(t.phase(), Phase::kEstablished) << t.error();
  ASSERT_EQ((*c)->state(), TlsState::kEstablished) << (*c)->error();
  EXPECT_EQ(t.client_alpn(), "http/1.1");

  ASSERT_TRUE((*c)->send_plaintext("GET / HTTP/1.1\r\n\r\n").ok());
  pump(**c, t, u->get());
  ASSERT_TRUE(t.send_to_upstream(t.take_from_client()).ok());
  pump(**c, t, u->get());
  EXPECT_EQ((*u)->take_plaintext(), "GET / HTTP/1.1\r\n\r\n");
  ASSERT_TRUE((*u)->send_plaintext("HTTP/1.1 204 No Content\r\n\r\n").ok());
  pump(**c, t, u->get());
  ASSERT_TRUE(t.send_to_client(t.take_from_upstream()).ok());
  pump(**c, t, u->get());
  EXPECT_EQ((*c)->take_plaintext(), "HTTP/1.1 204 No Content\r\n\r\n");
  (*c)->close();
  pump(**c, t, u->get());
  EXPECT_TRUE(t.client_done());
  EXPECT_FALSE(t.upstream_done());
}

// A proxy's own TLS with a plain upstream: the client's side is terminated,
// the upstream's bytes pass as they are.
TEST_F(SessionPair, TerminationWithAPlainUpstream) {
  faultline::TlsTermination t(server_ctx_, nullptr, "", "upstream.fl.test");
  auto c = TlsSession::client(client_ctx_, "mem.fl.test");
  ASSERT_TRUE(c.ok());
  pump(**c, t, nullptr);
  ASSERT_EQ(t.phase(), Phase::kConnectUpstream) << t.error();
  ASSERT_TRUE(t.upstream_connected().ok());
  pump(**c, t, nullptr);
  ASSERT_EQ(t.phase(), Phase::kEstablished) << t.error();
  ASSERT_TRUE((*c)->send_plaintext("GET / HTTP/1.1\r\n\r\n").ok());
  pump(**c, t, nullptr);
  ASSERT_TRUE(t.send_to_upstream(t.take_from_client()).ok());
  EXPECT_EQ(t.to_upstream(), "GET / HTTP/1.1\r\n\r\n") << "plaintext to a plain upstream";
  ASSERT_TRUE(t.from_upstream("HTTP/1.1 204 No Content\r\n\r\n").ok());
  ASSERT_TRUE(t.send_to_client(t.take_from_upstream()).ok());
  pump(**c, t, nullptr);
  EXPECT_EQ((*c)->take_plaintext(), "HTTP/1.1 204 No Content\r\n\r\n");
}

// A plain client, a TLS upstream verified for upstream_name: the client's
// bytes wait for the upstream's handshake; a refused upstream is a 502 naming why.
TEST_F(SessionPair, TerminationWithAPlainClient) {
  faultline::TlsTermination t(nullptr, client_ctx_, "", "mem.fl.test");
  ASSERT_EQ(t.phase(), Phase::kConnectUpstream) << "no hello to read";
  ASSERT_TRUE(t.from_client("GET /x HTTP/1.1\r\n\r\n").ok());
  EXPECT_EQ(t.take_from_client(), "") << "nothing before the upstream is verified";
  auto u = TlsSession::server(server_ctx_);
  ASSERT_TRUE(u.ok());
  ASSERT_TRUE(t.upstream_connected().ok());
  for (int i = 0; i < 10 && t.phase() == Phase::kUpstreamHandshake; ++i) {
    (void)(*u)->feed_ciphertext(t.to_upstream());
    (void)t.from_upstream((*u)->take_ciphertext());
  }
  ASSERT_EQ(t.phase(), Phase::kEstablished) << t.error();
  ASSERT_TRUE(t.send_to_upstream(t.take_from_client()).ok());
  (void)(*u)->feed_ciphertext(t.to_upstream());
  EXPECT_EQ((*u)->take_plaintext(), "GET /x HTTP/1.1\r\n\r\n");
  ASSERT_TRUE((*u)->send_plaintext("HTTP/1.1 204 No Content\r\n\r\n").ok());
  ASSERT_TRUE(t.from_upstream((*u)->take_ciphertext()).ok());
  ASSERT_TRUE(t.send_to_client(t.take_from_upstream()).ok());
  EXPECT_EQ(t.to_client(), "HTTP/1.1 204 No Content\r\n\r\n") << "plaintext to a plain client";

  auto other = CertificateAuthority::generate();
  ASSERT_TRUE(other.ok());
  auto other_server = TlsServerContext::create(
      std::make_shared<faultline::LeafCache>(std::make_shared<CertificateAuthority>(std::move(*other))));
  ASSERT_TRUE(other_server.ok());
  faultline::TlsTermination refused(nullptr, client_ctx_, "", "mem.fl.test");
  auto w = TlsSession::server(*other_server);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(refused.from_client("GET / HTTP/1.1\r\n\r\n").ok());
  ASSERT_TRUE(refused.upstream_connected().ok());
  for (int i = 0; i < 10 && refused.phase() == Phase::kUpstreamHandshake; ++i) {
    (void)(*w)->feed_ciphertext(refused.to_upstream());
    (void)refused.from_upstream((*w)->take_ciphertext());
  }
  ASSERT_EQ(refused.phase(), Phase::kFailed);
  const std::string answer = refused.to_client();
  EXPECT_EQ(answer.rfind("HTTP/1.1 502 Bad Gateway\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("upstream mem.fl.test: certificate refused"), std::string::npos) << answer;
}

TEST_F(SessionPair, TerminationRefusesAnUnverifiedUpstreamWithAnAlert) {
  auto other = CertificateAuthority::generate();
  ASSERT_TRUE(other.ok());
  auto other_server = TlsServerContext::create(
      std::make_shared<faultline::LeafCache>(std::make_shared<CertificateAuthority>(std::move(*other))));
  ASSERT_TRUE(other_server.ok());
  faultline::TlsTermination t(server_ctx_, client_ctx_);
  auto c = TlsSession::client(client_ctx_, "mem.fl.test");
  auto u = TlsSession::server(*other_server);
  ASSERT_TRUE(c.ok() && u.ok());
  pump(**c, t, nullptr);
  ASSERT_TRUE(t.upstream_connected().ok());
  // The alert reaches the client through to_client(): capture it first.
  for (int i = 0; i < 10 && t.phase() == Phase::kUpstreamHandshake; ++i) {
    (void)(*u)->feed_ciphertext(t.to_upstream());
    (void)t.from_upstream((*u)->take_ciphertext());
  }
  ASSERT_EQ(t.phase(), Phase::kFailed);
  EXPECT_NE(t.error().find("upstream mem.fl.test: certificate refused"), std::string::npos) << t.error();
  EXPECT_EQ(t.to_client(), faultline::tls_handshake_failure_alert());
  (void)(*c)->feed_ciphertext(faultline::tls_handshake_failure_alert());
  EXPECT_EQ((*c)->state(), TlsState::kFailed);
  EXPECT_NE((*c)->error().find("handshake failure"), std::string::npos) << (*c)->error();
}

TEST_F(SessionPair, TerminationReadsATrickledHello) {
  faultline::TlsTermination t(server_ctx_, client_ctx_);
  auto c = TlsSession::client(client_ctx_, "trickle.fl.test");
  ASSERT_TRUE(c.ok());
  const std::string hello = (*c)->take_ciphertext();
  for (size_t i = 0; i + 1 < hello.size(); ++i) {
    ASSERT_TRUE(t.from_client(hello.substr(i, 1)).ok());
    ASSERT_EQ(t.phase(), Phase::kReadingHello) << "after byte " << i;
  }
  ASSERT_TRUE(t.from_client(hello.substr(hello.size() - 1)).ok());
  EXPECT_EQ(t.phase(), Phase::kConnectUpstream) << t.error();
  EXPECT_EQ(t.upstream_host(), "trickle.fl.test");
  EXPECT_EQ(t.held_client_bytes(), hello);
}

TEST_F(SessionPair, TerminationHandsBackWhatIsNotTls) {
  faultline::TlsTermination t(server_ctx_, client_ctx_);
  ASSERT_TRUE(t.from_client("GET / HT").ok());
  EXPECT_EQ(t.phase(), Phase::kNotTls);
  ASSERT_TRUE(t.from_client("TP/1.1\r\n").ok());
  EXPECT_EQ(t.held_client_bytes(), "GET / HTTP/1.1\r\n");
  EXPECT_NE(t.error().find("is not a TLS handshake record"), std::string::npos) << t.error();

  faultline::TlsTermination broken(server_ctx_, client_ctx_);
  EXPECT_FALSE(broken.from_client(std::string("\x16\x03\x01\x00\x00", 5)).ok());
  EXPECT_EQ(broken.phase(), Phase::kFailed);
  EXPECT_EQ(broken.error(), "client: record 1 is empty");
}

}  // namespace
