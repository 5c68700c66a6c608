// The HTTP health guardrail beyond plain 200s: anything but a 2xx is a breach
// (a redirect included), and https:// health URLs are verified (a test CA made
// here, `openssl s_server` on loopback): trusted through --health-ca, refused
// by the system trust store, refused for a certificate of another name.
#include <cstdio>
#include <fstream>

#include "guardrail_env.h"

namespace flenf {
namespace {

class HealthGuardrailTest : public EnforceTest {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    cg_.emplace(unique_name("hlth"));
  }
  void TearDown() override {
    cg_.reset();
    EnforceTest::TearDown();
  }
  CommandResult run_with(const std::string& duration, const std::vector<std::string>& flags) const {
    std::vector<std::string> argv = {kFaultctl, "run",          "syscall",    "--syscall",     "connect",
                                     "--errno", "ECONNREFUSED", "--cgroup",   cg_->relative(), "--duration",
                                     duration,  "--json",       "--interval", "300ms"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return run(argv, 60s);
  }
  static std::string detail(const CommandResult& r) {
    auto ended = json_event(r.out, "ended");
    return ended ? ended->value("detail", "") : "";
  }
  std::optional<TestCgroup> cg_;
};

TEST_F(HealthGuardrailTest, ARedirectIsABreach) {
  HttpResponder moved([](const std::string&) { return http_response("302 Found", "", "Location: /login\r\n"); });
  CommandResult r = run_with("10s", {"--health-url", "http://127.0.0.1:" + std::to_string(moved.port()) + "/health"});
  EXPECT_TRUE(r.status.is(7)) << r.describe();
  EXPECT_NE(detail(r).find("health check: HTTP 302 (a redirect to /login"), std::string::npos) << r.describe();
  auto probe = json_event(r.out, "probe");
  ASSERT_TRUE(probe) << r.describe();
  EXPECT_EQ((*probe)["status"], 302) << probe->dump();
}

TEST_F(HealthGuardrailTest, A204IsHealthy) {
  HttpResponder ok([](const std::string&) { return std::string("HTTP/1.1 204 No Content\r\n\r\n"); });
  CommandResult r = run_with("1s", {"--health-url", "http://127.0.0.1:" + std::to_string(ok.port()) + "/health"});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_GE(ok.requests(), 2) << r.describe();
}

class HttpsHealthTest : public HealthGuardrailTest {
 protected:
  void SetUp() override {
    HealthGuardrailTest::SetUp();
    if (IsSkipped()) return;
    ca_.emplace(state_dir_ + "/ca");
    ca_->issue("localhost", "DNS:localhost,IP:127.0.0.1");
    ca_->issue("other", "DNS:other.example");
  }
  void TearDown() override {
    ca_.reset();
    HealthGuardrailTest::TearDown();
  }
  std::optional<TestCa> ca_;
};

TEST_F(HttpsHealthTest, TrustedThroughHealthCaByNameAndByAddress) {
  TlsServer tls(ca_->cert("localhost"), ca_->key("localhost"));
  for (const std::string host : {"localhost", "127.0.0.1"}) {
    const std::string url = "https://" + host + ":" + std::to_string(tls.port()) + "/health";
    CommandResult r = run_with("1s", {"--health-url", url, "--health-ca", ca_->ca_pem()});
    EXPECT_TRUE(r.status.is(0)) << r.describe();
    auto probes = json_events_named(r.out, "probe");
    ASSERT_GE(probes.size(), 2u) << r.describe();
    for (const auto& p : probes) {
      EXPECT_EQ(p["healthy"], true) << p.dump();
      EXPECT_EQ(p["status"], 200) << p.dump();
    }
    auto started = json_event(r.out, "started");
    ASSERT_TRUE(started) << r.describe();
    EXPECT_EQ((*started)["guardrail"]["health_ca"], ca_->ca_pem()) << started->dump();
    std::fprintf(stderr, "[ info ] https://%s: %zu probes, first latency %.2fms\n", host.c_str(), probes.size(),
                 probes.front().value("latency_ms", 0.0));
  }
}

TEST_F(HttpsHealthTest, TheSystemTrustStoreDoesNotKnowTheTestCa) {
  TlsServer tls(ca_->cert("localhost"), ca_->key("localhost"));
  CommandResult r = run_with("10s", {"--health-url", "https://localhost:" + std::to_string(tls.port()) + "/"});
  EXPECT_TRUE(r.status.is(7)) << r.describe();
  EXPECT_NE(detail(r).find("health check: TLS: certificate verify failed: unable to get local issuer certificate"),
            std::string::npos)
      << r.describe();
}

TEST_F(HttpsHealthTest, ACertificateForAnotherNameIsABreach) {
  TlsServer tls(ca_->cert("other"), ca_->key("other"));
  CommandResult name = run_with(
      "10s", {"--health-url", "https://localhost:" + std::to_string(tls.port()) + "/", "--health-ca", ca_->ca_pem()});
  EXPECT_TRUE(name.status.is(7)) << name.describe();
  EXPECT_NE(detail(name).find("certificate verify failed: hostname mismatch"), std::string::npos) << name.describe();
  CommandResult addr = run_with(
      "10s", {"--health-url", "https://127.0.0.1:" + std::to_string(tls.port()) + "/", "--health-ca", ca_->ca_pem()});
  EXPECT_TRUE(addr.status.is(7)) << addr.describe();
  EXPECT_NE(detail(addr).find("certificate verify failed: IP address mismatch"), std::string::npos) << addr.describe();
}

TEST_F(HttpsHealthTest, AHealthCaThatIsNotACertificateIsBadInput) {
  const std::string junk = state_dir_ + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  CommandResult r = run_with("10s", {"--health-url", "https://localhost:1/", "--health-ca", junk});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--health-ca " + junk + ": no PEM certificate could be loaded"), std::string::npos)
      << r.describe();
}

}  // namespace
}  // namespace flenf
