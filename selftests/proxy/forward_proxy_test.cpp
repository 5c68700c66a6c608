// The proxy as an explicit forward proxy (HTTP_PROXY / HTTPS_PROXY) with a
// test RequestJudge, driven by real curl on loopback: every verdict (forward,
// answer, hold completed from another thread, hold withdrawn by a client that
// left), CONNECT judged by host and by SNI, termination judging the inner
// path, the proxy's own 400s, 407 and 502. No root.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "selftests/lib/child_process.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/proxy/seen_upstream.h"
#include "selftests/tls/tls_harness.h"
#include "userspace/proxy/proxy_registry.h"
#include "userspace/proxy/tls_leaf_cache.h"

namespace {

using faultline::HeldRequest;
using faultline::RequestHead;
using faultline::RequestStage;
using faultline::RequestVerdict;
using fltest::CommandResult;
using fltest::UniqueFd;
using namespace std::chrono_literals;

const std::string kDeniedBody = "{\"error\":\"denied by test judge\"}";
const std::string kDenied = "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(kDeniedBody.size()) + "\r\n\r\n" + kDeniedBody;

// Records every call; what it answers is the test's `decide`.
class TestJudge : public faultline::RequestJudge {
 public:
  std::function<RequestVerdict(const RequestHead&, const HeldRequest&)> decide;

  RequestVerdict judge(const RequestHead& head, HeldRequest later) override {
    {
      std::lock_guard lock(mu_);
      heads_.push_back(head);
      holds_[head.id] = later;
    }
    cv_.notify_all();
    return decide ? decide(head, later) : RequestVerdict::forward();
  }
  void withdrawn(uint64_t id) override {
    {
      std::lock_guard lock(mu_);
      withdrawn_.insert(id);
    }
    cv_.notify_all();
  }
  void on_response_bytes(uint64_t id, std::string_view bytes, bool end) override {
    std::lock_guard lock(mu_);
    responses_[id].append(bytes);
    if (end) ended_.insert(id);
  }

  // Waits up to `timeout` for the n-th head; a copy of it.
  std::optional<RequestHead> wait_head(size_t n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return heads_.size() >= n; })) return std::nullopt;
    return heads_[n - 1];
  }
  HeldRequest hold_of(uint64_t id) {
    std::lock_guard lock(mu_);
    return holds_[id];
  }
  bool wait_withdrawn(uint64_t id, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return withdrawn_.count(id) > 0; });
  }
  std::vector<RequestHead> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }
  std::string response_of(uint64_t id, bool* ended) {
    std::lock_guard lock(mu_);
    *ended = ended_.count(id) > 0;
    return responses_[id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RequestHead> heads_;
  std::map<uint64_t, HeldRequest> holds_;
  std::set<uint64_t> withdrawn_;
  std::map<uint64_t, std::string> responses_;
  std::set<uint64_t> ended_;
};

using PlainUpstream = fltest::SeenUpstream;

class ForwardProxyTest : public ::testing::Test {
 protected:
  void start(std::string proxy_authorization = {}) {
    faultline::ProxyOptions po;
    po.workers = 2;
    po.receive = receive_;
    auto reg = faultline::ProxyRegistry::start(po);
    ASSERT_TRUE(reg.ok()) << reg.error().describe();
    proxies_ = std::move(*reg);
    faultline::ProxyConfig pc;
    pc.name = "fwd";
    pc.listen = "127.0.0.1:0";
    pc.forward = faultline::ForwardProxy{judge_, std::move(proxy_authorization)};
    auto info = proxies_->create(pc);
    ASSERT_TRUE(info.ok()) << info.error().describe();
    port_ = fltest::port_of(info->listen_bound);
    proxy_url_ = "http://127.0.0.1:" + std::to_string(port_);
  }

  // An HTTPS upstream (python3) with a leaf of upstream_ca_ for `cert_host`;
  // `terminate`: the proxy ends the client's TLS with our_ca_'s leaves and
  // trusts upstream_ca_ towards the upstream.
  void start_tls(bool terminate, const std::string& cert_host = "127.0.0.1") {
    auto ours = faultline::CertificateAuthority::generate();
    auto theirs = faultline::CertificateAuthority::generate();
    ASSERT_TRUE(ours.ok() && theirs.ok());
    our_ca_ = std::make_shared<faultline::CertificateAuthority>(std::move(*ours));
    upstream_ca_ = std::make_shared<faultline::CertificateAuthority>(std::move(*theirs));
    fltest::write_file(dir_.file("our-ca.pem"), our_ca_->cert_pem());
    fltest::write_file(dir_.file("upstream-ca.pem"), upstream_ca_->cert_pem());
    auto leaf = upstream_ca_->mint_leaf(cert_host);
    ASSERT_TRUE(leaf.ok());
    tls_upstream_ =
        std::make_unique<fltest::HttpsUpstream>(dir_, (*leaf)->cert_pem(), fltest::private_key_pem((*leaf)->key()));
    ASSERT_TRUE(tls_upstream_->started()) << tls_upstream_->describe();
    if (!terminate) return;
    faultline::HttpTls tls;
    tls.mode = faultline::HttpTlsMode::terminate;
    auto server = faultline::TlsServerContext::create(std::make_shared<faultline::LeafCache>(our_ca_));
    ASSERT_TRUE(server.ok()) << server.error().describe();
    faultline::TlsClientOptions o;
    o.upstream_ca_file = dir_.file("upstream-ca.pem");
    auto client = faultline::TlsClientContext::create(o);
    ASSERT_TRUE(client.ok()) << client.error().describe();
    tls.server = *server;
    tls.client = *client;
    ASSERT_TRUE(proxies_->set_http_tls("fwd", tls).ok());
  }

  // curl through the proxy: -x for http URLs, https_proxy in the environment
  // for https ones (as an agent would have it), the status code last.
  CommandResult curl(const std::string& url, std::vector<std::string> extra = {}, const std::string& max_time = "10") {
    std::vector<std::string> argv = {"curl", "-sS", "--max-time", max_time, "-w", "[%{http_code}]"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::vector<std::string> env = {"NO_PROXY=", "no_proxy=", "SSL_CERT_FILE=", "CURL_CA_BUNDLE="};
    if (url.rfind("https://", 0) == 0) {
      env.push_back("https_proxy=" + proxy_url_);
      env.push_back("HTTPS_PROXY=" + proxy_url_);
    } else {
      argv.insert(argv.end(), {"-x", proxy_url_});
    }
    argv.push_back(url);
    return fltest::run_command(argv, {.env = env}, 20s);
  }

  // A raw request and everything the proxy sends back until it closes; ECONNRESET shows in `err`.
  fltest::ReadEnd raw(const std::string& request) {
    UniqueFd fd = fltest::connect_loopback(port_, 5000);
    fltest::send_all(fd.get(), request);
    return fltest::read_to_end(fd.get());
  }

  faultline::ReceiveMode receive_ = faultline::ReceiveMode::automatic;
  std::shared_ptr<TestJudge> judge_ = std::make_shared<TestJudge>();
  std::unique_ptr<faultline::ProxyRegistry> proxies_;
  uint16_t port_ = 0;
  std::string proxy_url_;
  fltest::TempDir dir_;
  std::shared_ptr<faultline::CertificateAuthority> our_ca_, upstream_ca_;
  std::unique_ptr<fltest::HttpsUpstream> tls_upstream_;
};

std::string up_url(uint16_t port, const std::string& path) { return "http://127.0.0.1:" + std::to_string(port) + path; }

TEST_F(ForwardProxyTest, ForwardVerdictReachesTheUpstreamInOriginForm) {
  PlainUpstream up;
  start();
  auto r = curl(up_url(up.port(), "/x?y=1"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "upstream saw GET /x?y=1 HTTP/1.1[200]");
  auto head = judge_->wait_head(1);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->stage, RequestStage::request);
  EXPECT_EQ(head->method, "GET");
  EXPECT_EQ(head->scheme, "http");
  EXPECT_EQ(head->host, "127.0.0.1");
  EXPECT_EQ(head->port, up.port());
  EXPECT_EQ(head->target, "/x?y=1");
  EXPECT_FALSE(head->tls_terminated);
  EXPECT_EQ(head->peer.family(), AF_INET);
  EXPECT_NE(head->id, 0u);
  // The upstream got origin-form, no proxy fields, and one exchange.
  auto seen = up.heads();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].rfind("GET /x?y=1 HTTP/1.1\r\n", 0), 0u) << seen[0];
  EXPECT_EQ(seen[0].find("Proxy-"), std::string::npos) << seen[0];
  EXPECT_NE(seen[0].find("Connection: close\r\n"), std::string::npos) << seen[0];
}

TEST_F(ForwardProxyTest, AnswerVerdictIsSentAndTheUpstreamSeesNothing) {
  PlainUpstream up;
  start();
  judge_->decide = [](const RequestHead&, const HeldRequest&) { return RequestVerdict::answer(kDenied); };
  auto r = curl(up_url(up.port(), "/secrets/key"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "{\"error\":\"denied by test judge\"}[403]");
  EXPECT_TRUE(up.heads().empty());
}

TEST_F(ForwardProxyTest, HoldCompletedFromAnotherThreadForwardsWithinASecond) {
  PlainUpstream up;
  start();
  judge_->decide = [](const RequestHead&, const HeldRequest&) { return RequestVerdict::hold(); };
  auto client = std::async(std::launch::async, [&] { return curl(up_url(up.port(), "/held")); });
  auto head = judge_->wait_head(1);
  ASSERT_TRUE(head);
  std::this_thread::sleep_for(300ms);  // held: nothing upstream yet
  EXPECT_TRUE(up.heads().empty());
  const auto t0 = std::chrono::steady_clock::now();
  std::thread approver([&] { EXPECT_TRUE(judge_->hold_of(head->id).complete(RequestVerdict::forward())); });
  approver.join();
  auto r = client.get();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "upstream saw GET /held HTTP/1.1[200]");
  EXPECT_LT(seconds, 1.0);
  // A second completion is refused.
  EXPECT_FALSE(judge_->hold_of(head->id).complete(RequestVerdict::forward()));
}

TEST_F(ForwardProxyTest, HoldCompletedWithAnAnswerSendsIt) {
  PlainUpstream up;
  start();
  judge_->decide = [](const RequestHead& h, const HeldRequest& later) {
    std::thread([later] {
      std::this_thread::sleep_for(100ms);
      later.complete(RequestVerdict::answer(kDenied));
    }).detach();
    (void)h;
    return RequestVerdict::hold();
  };
  auto r = curl(up_url(up.port(), "/approve-me"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "{\"error\":\"denied by test judge\"}[403]");
  EXPECT_TRUE(up.heads().empty());
}

TEST_F(ForwardProxyTest, ClientLeavingAHeldRequestWithdrawsIt) {
  PlainUpstream up;
  start();
  judge_->decide = [](const RequestHead&, const HeldRequest&) { return RequestVerdict::hold(); };
  auto r = curl(up_url(up.port(), "/held"), {}, "1");  // curl gives up after 1 s
  EXPECT_TRUE(r.status.is(28)) << r.describe();        // CURLE_OPERATION_TIMEDOUT
  auto head = judge_->wait_head(1);
  ASSERT_TRUE(head);
  EXPECT_TRUE(judge_->wait_withdrawn(head->id));
  // A verdict after that is a no-op: nothing reaches the upstream.
  (void)judge_->hold_of(head->id).complete(RequestVerdict::forward());
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(up.heads().empty());
}

TEST_F(ForwardProxyTest, ResponseBytesReachTheJudgeWhenAsked) {
  PlainUpstream up;
  start();
  judge_->decide = [](const RequestHead&, const HeldRequest&) { return RequestVerdict::forward(true); };
  auto r = curl(up_url(up.port(), "/usage"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  auto head = judge_->wait_head(1);
  ASSERT_TRUE(head);
  bool ended = false;
  for (int i = 0; i < 50 && !ended; ++i) {
    (void)judge_->response_of(head->id, &ended);
    if (!ended) std::this_thread::sleep_for(20ms);
  }
  const std::string seen = judge_->response_of(head->id, &ended);
  EXPECT_TRUE(ended);
  EXPECT_EQ(seen.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << seen;
  EXPECT_NE(seen.find("upstream saw GET /usage HTTP/1.1"), std::string::npos) << seen;
}

TEST_F(ForwardProxyTest, ConnectIsJudgedByHostAndTunnelled) {
  start();
  start_tls(false);
  auto r = curl("https://127.0.0.1:" + std::to_string(tls_upstream_->port()) + "/tunnel", {"-k"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "hello from upstream /tunnel[200]");
  auto heads = judge_->heads();
  ASSERT_EQ(heads.size(), 1u);  // no SNI for an address: the CONNECT alone
  EXPECT_EQ(heads[0].stage, RequestStage::connect);
  EXPECT_EQ(heads[0].method, "CONNECT");
  EXPECT_EQ(heads[0].host, "127.0.0.1");
  EXPECT_EQ(heads[0].port, tls_upstream_->port());
  EXPECT_TRUE(heads[0].target.empty());
}

TEST_F(ForwardProxyTest, ConnectDeniedGetsTheAnswerAndNoTunnel) {
  start();
  start_tls(false);
  judge_->decide = [](const RequestHead&, const HeldRequest&) { return RequestVerdict::answer(kDenied); };
  auto r = curl("https://127.0.0.1:" + std::to_string(tls_upstream_->port()) + "/", {"-k"});
  EXPECT_FALSE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("403"), std::string::npos) << r.describe();
  EXPECT_EQ(tls_upstream_->requests(), 0);
}

TEST_F(ForwardProxyTest, TunnelSniIsJudgedToo) {
  start();
  start_tls(false, "api.fl.test");
  const std::string port = std::to_string(tls_upstream_->port());
  judge_->decide = [](const RequestHead& h, const HeldRequest&) {
    return h.stage == RequestStage::tls_sni && h.host == "api.fl.test" ? RequestVerdict::answer(kDenied)
                                                                       : RequestVerdict::forward();
  };
  // CONNECT names the address, the ClientHello names api.fl.test.
  auto r =
      curl("https://api.fl.test:" + port + "/", {"-k", "--connect-to", "api.fl.test:" + port + ":127.0.0.1:" + port});
  EXPECT_FALSE(r.status.is(0)) << r.describe();
  auto heads = judge_->heads();
  ASSERT_EQ(heads.size(), 2u) << r.describe();
  EXPECT_EQ(heads[0].stage, RequestStage::connect);
  EXPECT_EQ(heads[0].host, "127.0.0.1");
  EXPECT_EQ(heads[1].stage, RequestStage::tls_sni);
  EXPECT_EQ(heads[1].host, "api.fl.test");
  EXPECT_EQ(tls_upstream_->requests(), 0);
}

TEST_F(ForwardProxyTest, TerminatedTunnelJudgesEachInnerRequestWithItsPath) {
  start();
  start_tls(true);
  const std::string port = std::to_string(tls_upstream_->port());
  judge_->decide = [](const RequestHead& h, const HeldRequest&) {
    return h.stage == RequestStage::inner && h.target.rfind("/deny", 0) == 0 ? RequestVerdict::answer(kDenied, false)
                                                                             : RequestVerdict::forward();
  };
  auto r = curl("https://127.0.0.1:" + port + "/inner/path?q=1", {"--cacert", dir_.file("our-ca.pem")});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "hello from upstream /inner/path?q=1[200]");
  auto heads = judge_->heads();
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_EQ(heads[0].stage, RequestStage::connect);
  EXPECT_EQ(heads[1].stage, RequestStage::inner);
  EXPECT_EQ(heads[1].method, "GET");
  EXPECT_EQ(heads[1].scheme, "https");
  EXPECT_EQ(heads[1].host, "127.0.0.1");
  EXPECT_EQ(heads[1].port, tls_upstream_->port());
  EXPECT_EQ(heads[1].target, "/inner/path?q=1");
  EXPECT_TRUE(heads[1].tls_terminated);

  auto denied = curl("https://127.0.0.1:" + port + "/deny/this", {"--cacert", dir_.file("our-ca.pem")});
  ASSERT_TRUE(denied.status.is(0)) << denied.describe();
  EXPECT_EQ(denied.out, "{\"error\":\"denied by test judge\"}[403]");
  EXPECT_EQ(tls_upstream_->requests(), 1);
}

TEST_F(ForwardProxyTest, HeldConnectIsWithdrawnOrForwarded) {
  start();
  start_tls(true);
  const std::string url = "https://127.0.0.1:" + std::to_string(tls_upstream_->port()) + "/after-approval";
  judge_->decide = [](const RequestHead& h, const HeldRequest&) {
    return h.stage == RequestStage::connect ? RequestVerdict::hold() : RequestVerdict::forward();
  };
  // The client gives up: the CONNECT is withdrawn.
  auto gone = curl(url, {"--cacert", dir_.file("our-ca.pem")}, "1");
  EXPECT_FALSE(gone.status.is(0)) << gone.describe();
  auto first = judge_->wait_head(1);
  ASSERT_TRUE(first);
  EXPECT_TRUE(judge_->wait_withdrawn(first->id));
  // Approved while the client waits: the tunnel opens, the inner request is judged and served.
  auto client = std::async(std::launch::async, [&] { return curl(url, {"--cacert", dir_.file("our-ca.pem")}); });
  auto second = judge_->wait_head(2);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->stage, RequestStage::connect);
  EXPECT_TRUE(judge_->hold_of(second->id).complete(RequestVerdict::forward()));
  auto r = client.get();
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "hello from upstream /after-approval[200]");
  auto inner = judge_->wait_head(3);
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->target, "/after-approval");
}

TEST_F(ForwardProxyTest, PlainReceiveModeForwardsAndTerminatesToo) {
  receive_ = faultline::ReceiveMode::plain;
  PlainUpstream up;
  start();
  start_tls(true);
  auto plain = curl(up_url(up.port(), "/plain"));
  ASSERT_TRUE(plain.status.is(0)) << plain.describe();
  EXPECT_EQ(plain.out, "upstream saw GET /plain HTTP/1.1[200]");
  auto tls = curl("https://127.0.0.1:" + std::to_string(tls_upstream_->port()) + "/tls",
                  {"--cacert", dir_.file("our-ca.pem")});
  ASSERT_TRUE(tls.status.is(0)) << tls.describe();
  EXPECT_EQ(tls.out, "hello from upstream /tls[200]");
}

// The proxy's own answers: a 400 naming what is wrong, then a FIN (never a reset).
void expect_400(const fltest::ReadEnd& got, const std::string& needle) {
  EXPECT_EQ(got.err, 0) << "ended by errno " << got.err;
  EXPECT_EQ(got.data.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << got.data;
  EXPECT_NE(got.data.find(needle), std::string::npos) << got.data;
}

TEST_F(ForwardProxyTest, BadInputGets400NamingTheProblem) {
  start();
  expect_400(raw("GARBAGE\r\n\r\n"), "malformed request: ");
  expect_400(raw("GET http://127.0.0.1:99999/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), "bad port \"99999\"");
  expect_400(raw("GET http://127.0.0.1:8x/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), "bad port \"8x\"");
  expect_400(raw("CONNECT 127.0.0.1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), "CONNECT needs a port");
  expect_400(raw("GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), "absolute-form URL");
  expect_400(raw("GET ftp://127.0.0.1/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), "unsupported scheme");
  EXPECT_TRUE(judge_->heads().empty());  // none of them reached the judge
}

TEST_F(ForwardProxyTest, UnreachableUpstreamGets502NamingIt) {
  start();
  uint16_t dead = 0;
  { UniqueFd l = fltest::listen_loopback(&dead); }  // a port nobody listens on now
  auto r = curl(up_url(dead, "/"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("cannot reach 127.0.0.1:" + std::to_string(dead)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[502]"), std::string::npos) << r.out;
}

TEST_F(ForwardProxyTest, ProxyAuthorizationIsRequiredBeforeTheJudge) {
  PlainUpstream up;
  start("Basic " + std::string("YWdlbnQ6czNjcmV0"));  // agent:s3cret
  auto missing = curl(up_url(up.port(), "/"), {"-i"});
  ASSERT_TRUE(missing.status.is(0)) << missing.describe();
  EXPECT_NE(missing.out.find("HTTP/1.1 407"), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("Proxy-Authenticate: Basic realm=\"faultline\""), std::string::npos) << missing.out;
  auto wrong = curl(up_url(up.port(), "/"), {"-U", "agent:wrong"});
  EXPECT_NE(wrong.out.find("[407]"), std::string::npos) << wrong.describe();
  EXPECT_TRUE(judge_->heads().empty());
  auto right = curl(up_url(up.port(), "/ok"), {"-U", "agent:s3cret"});
  ASSERT_TRUE(right.status.is(0)) << right.describe();
  EXPECT_EQ(right.out, "upstream saw GET /ok HTTP/1.1[200]");
  EXPECT_EQ(judge_->heads().size(), 1u);
  EXPECT_EQ(up.heads().at(0).find("Proxy-Authorization"), std::string::npos);
}

}  // namespace
