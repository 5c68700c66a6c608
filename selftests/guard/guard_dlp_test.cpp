// faultctl guard --dlp end to end: the real faultctl (as nobody when root)
// with real curl through its proxy, against a loopback upstream that keeps
// every request's body. Deny answers 403 (rule dlp-block) and nothing goes
// upstream; redact sends a masked body of the same length; monitor forwards
// and logs. Every output, log and activity record is searched for the
// planted secrets.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/dlp_samples.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/tls/tls_harness.h"
#include "userspace/proxy/tls_ca.h"

namespace {

using fltest::CommandResult;
using fltest::UniqueFd;
using namespace std::chrono_literals;
namespace samples = faultline::dlp_samples;

const std::string kDlpFaultctl = FAULTCTL_PATH;

// One request per connection; keeps its body (Content-Length framed).
class BodyUpstream {
 public:
  BodyUpstream()
      : server_([this](UniqueFd fd) {
          auto read = fltest::read_one_request(fd.get());
          if (!read) return;
          const std::string& data = *read;
          {
            std::lock_guard lock(mu_);
            seen_.push_back(data);
          }
          const std::string reply = "ok";
          const std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n" + reply;
          (void)::send(fd.get(), resp.data(), resp.size(), MSG_NOSIGNAL);
        }) {}
  [[nodiscard]] std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(server_.port()) + path;
  }
  [[nodiscard]] std::vector<std::string> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> seen_;
  fltest::ScriptServer server_;
};

std::string body_of(const std::string& request) { return request.substr(request.find("\r\n\r\n") + 4); }

class GuardDlpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path(), {"FAULTLINE_STATE_DIR=" + dir_.file("state")});
    std::mt19937_64 rng(2026);
    aws_ = samples::aws_key(rng);
    github_ = samples::github_token(rng);
    card_ = samples::card(rng);
    pem_ = samples::pem_key();
    body_ =
        nlohmann::json{
            {"model", "claude-test"},
            {"messages",
             {{{"role", "user"},
               {"content", "deploy with " + aws_ + " and " + github_ + ", card " + card_ + ", key:\n" + pem_}}}}}
            .dump();
    ASSERT_LT(body_.size(), 4096u);  // fits one command-line argument comfortably
    fltest::write_file(dir_.file("body.json"), body_);
    ASSERT_EQ(::chmod(dir_.file("body.json").c_str(), 0644), 0);
  }

  CommandResult guard(std::vector<std::string> flags, const std::string& url,
                      std::vector<std::string> curl_extra = {}) {
    std::vector<std::string> argv = {kDlpFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "curl", "-sS", "--max-time", "20", "-w",
                             "[%{http_code}]", "-H", "Content-Type: application/json", "--data-binary",
                             "@" + dir_.file("body.json")});
    argv.insert(argv.end(), curl_extra.begin(), curl_extra.end());
    argv.push_back(url);
    argv = fltest::as_nobody(std::move(argv));
    return fltest::run_command(argv, {.env = env_}, 60s);
  }

  std::string activity() {
    std::ifstream in(dir_.file("activity.jsonl"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // No planted secret in anything the guard wrote.
  void expect_no_secret(const CommandResult& r) {
    std::vector<std::string> secrets = {aws_, github_, card_, pem_};
    // The PEM's base64 lines are secret too.
    std::string line;
    for (std::istringstream lines(pem_); std::getline(lines, line);)
      if (line.find("-----") == std::string::npos) secrets.push_back(line);
    const std::string act = activity();
    for (const std::string& s : secrets) {
      EXPECT_EQ(r.out.find(s), std::string::npos) << "stdout carries " << s;
      EXPECT_EQ(r.err.find(s), std::string::npos) << "stderr carries " << s;
      EXPECT_EQ(act.find(s), std::string::npos) << "the activity log carries " << s;
    }
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
  std::string aws_, github_, card_, pem_, body_;
};

TEST_F(GuardDlpTest, DenyAnswers403WithRuleDlpBlockAndNothingGoesUpstream) {
  BodyUpstream up;
  auto r = guard({"--enforce", "--terminate-tls", "--dlp"}, up.url("/v1/upload"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  ASSERT_EQ(r.out.substr(r.out.rfind('[')), "[403]") << r.out;
  auto j = nlohmann::json::parse(r.out.substr(0, r.out.rfind('[')), nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["rule"], "dlp-block");
  EXPECT_NE(j["reason"].get<std::string>().find("aws_access_key"), std::string::npos) << j.dump();
  EXPECT_TRUE(up.seen().empty());
  for (const char* type : {"aws_access_key", "github_token", "credit_card", "private_key"})
    EXPECT_NE(r.err.find(type), std::string::npos) << type << "\n" << r.err;
  EXPECT_NE(activity().find("\"rule\":\"dlp-block\""), std::string::npos) << activity();
  // The denial's line carries the types as its reason (never a value: expect_no_secret).
  EXPECT_NE(activity().find("\"rule\":\"dlp-block\",\"reason\":\"DLP: "), std::string::npos) << activity();
  expect_no_secret(r);
}

TEST_F(GuardDlpTest, RedactSendsTheUpstreamAMaskedBodyOfTheSameLength) {
  BodyUpstream up;
  std::mt19937_64 rng(77);
  const std::string header_token = samples::npm_token(rng);
  auto r = guard({"--enforce", "--terminate-tls", "--dlp", "--dlp-action", "redact"}, up.url("/v1/upload"),
                 {"-H", "X-Deploy-Token: " + header_token});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "ok[200]");
  auto seen = up.seen();
  ASSERT_EQ(seen.size(), 1u);
  const std::string sent = body_of(seen[0]);
  ASSERT_EQ(sent.size(), body_.size());
  for (const std::string& s : {aws_, github_, card_}) EXPECT_EQ(sent.find(s), std::string::npos) << s;
  EXPECT_EQ(sent.find("PRIVATE KEY-----\\n"), std::string::npos) << sent;
  EXPECT_NE(sent.find("deploy with ****"), std::string::npos) << sent;
  // The header holding a token goes with it masked, at its length.
  const std::string head = seen[0].substr(0, seen[0].find("\r\n\r\n"));
  EXPECT_EQ(head.find(header_token), std::string::npos) << head;
  EXPECT_NE(head.find(": " + std::string(header_token.size(), '*')), std::string::npos) << head;
  EXPECT_EQ(r.err.find(header_token), std::string::npos);
  auto masked = nlohmann::json::parse(sent, nullptr, false);
  EXPECT_TRUE(masked.is_object()) << "the masked body is still JSON: " << sent;
  EXPECT_NE(activity().find("\"rule\":\"dlp-redact\""), std::string::npos) << activity();
  expect_no_secret(r);
}

TEST_F(GuardDlpTest, RedactMasksSecretsAcrossALargeBodyAtTheirOffsets) {
  // 600 KB: many reads of the proxy, secrets at the start, the middle and the end.
  std::string big = "{\"text\":\"" + aws_ + " ";
  const size_t mid = 300'000;
  big += std::string(mid - big.size(), 'a') + " " + github_ + " ";
  big += std::string(600'000 - big.size(), 'b') + " " + card_ + "\"}";
  fltest::write_file(dir_.file("body.json"), big);
  BodyUpstream up;
  auto r = guard({"--enforce", "--terminate-tls", "--dlp", "--dlp-action", "redact"}, up.url("/v1/upload"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "ok[200]");
  auto seen = up.seen();
  ASSERT_EQ(seen.size(), 1u);
  const std::string sent = body_of(seen[0]);
  ASSERT_EQ(sent.size(), big.size());
  for (const std::string& s : {aws_, github_, card_}) {
    const size_t at = big.find(s);
    EXPECT_EQ(sent.substr(at, s.size()), std::string(s.size(), '*')) << s;
  }
  // Everything else as it was.
  std::string expect = big;
  for (const std::string& s : {aws_, github_, card_}) expect.replace(big.find(s), s.size(), std::string(s.size(), '*'));
  EXPECT_TRUE(sent == expect);
  expect_no_secret(r);
}

TEST_F(GuardDlpTest, MonitorForwardsTheBodyAsItIsAndLogsTheFindings) {
  BodyUpstream up;
  auto r = guard({"--enforce", "--terminate-tls", "--dlp", "--dlp-action", "monitor"}, up.url("/v1/upload"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "ok[200]");
  auto seen = up.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(body_of(seen[0]), body_);
  EXPECT_NE(r.err.find("dlp: aws_access_key"), std::string::npos) << r.err;
  EXPECT_NE(activity().find("\"rule\":\"dlp-monitor\""), std::string::npos) << activity();
  expect_no_secret(r);
}

TEST_F(GuardDlpTest, TerminatedHttpsIsScannedAndDeniedBeforeTheUpstream) {
  auto ours = faultline::CertificateAuthority::generate();
  ASSERT_TRUE(ours.ok());
  auto leaf = ours->mint_leaf("127.0.0.1");
  ASSERT_TRUE(leaf.ok());
  fltest::write_file(dir_.file("upstream-ca.pem"), ours->cert_pem());
  ASSERT_EQ(::chmod(dir_.file("upstream-ca.pem").c_str(), 0644), 0);
  fltest::HttpsUpstream up(dir_, (*leaf)->cert_pem(), fltest::private_key_pem((*leaf)->key()));
  ASSERT_TRUE(up.started()) << up.describe();
  const std::string url = "https://127.0.0.1:" + std::to_string(up.port()) + "/v1/messages";
  auto r = guard({"--enforce", "--terminate-tls", "--upstream-ca", dir_.file("upstream-ca.pem"), "--dlp"}, url);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  ASSERT_EQ(r.out.substr(r.out.rfind('[')), "[403]") << r.out;
  EXPECT_NE(r.out.find("dlp-block"), std::string::npos) << r.out;
  EXPECT_EQ(up.requests(), 0);
  expect_no_secret(r);
}

TEST_F(GuardDlpTest, AContentPolicyLineThatIsBadIsRefusedAtStartWithItsLine) {
  fltest::write_file(dir_.file("content.txt"), "# ours\ncodename: Bluebird\nticket: re:(FIN-\n");
  ASSERT_EQ(::chmod(dir_.file("content.txt").c_str(), 0644), 0);
  BodyUpstream up;
  auto r = guard({"--enforce", "--content-policy", dir_.file("content.txt")}, up.url("/x"));
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find(dir_.file("content.txt") + ":3: label 'ticket'"), std::string::npos) << r.err;
  EXPECT_TRUE(up.seen().empty());
}

TEST_F(GuardDlpTest, AContentPolicyMatchIsDenied) {
  fltest::write_file(dir_.file("content.txt"), "deploy-words: DEPLOY WITH\n");
  ASSERT_EQ(::chmod(dir_.file("content.txt").c_str(), 0644), 0);
  BodyUpstream up;
  auto r = guard({"--enforce", "--content-policy", dir_.file("content.txt")}, up.url("/x"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  ASSERT_EQ(r.out.substr(r.out.rfind('[')), "[403]") << r.out;
  EXPECT_NE(r.out.find("content-policy"), std::string::npos) << r.out;
  EXPECT_TRUE(up.seen().empty());
}

// Expect: 100-continue (curl sends it for larger bodies): the guard that reads
// the body says 100 Continue itself, as the upstream is not asked yet; curl
// is told to wait 30 s for it, so a guard that did not would fail the test
// by curl's --max-time. The upstream gets the body without the Expect.
TEST_F(GuardDlpTest, ExpectContinueGetsA100FromTheGuardThatReadsTheBody) {
  BodyUpstream up;
  auto r = guard({"--enforce", "--terminate-tls", "--dlp", "--dlp-action", "monitor"}, up.url("/v1/upload"),
                 {"-v", "-H", "Expect: 100-continue", "--expect100-timeout", "30"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "ok[200]") << r.err;
  EXPECT_NE(r.err.find("< HTTP/1.1 100 Continue"), std::string::npos) << r.err;
  auto seen = up.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(body_of(seen[0]), body_);
  std::string head = seen[0].substr(0, seen[0].find("\r\n\r\n"));
  for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_EQ(head.find("expect:"), std::string::npos) << head;

  // A body with secrets, denied once read: the 100 first, then the 403.
  BodyUpstream up2;
  r = guard({"--enforce", "--terminate-tls", "--dlp"}, up2.url("/v1/upload"),
            {"-v", "-H", "Expect: 100-continue", "--expect100-timeout", "30"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out.substr(r.out.rfind('[')), "[403]") << r.out;
  EXPECT_NE(r.err.find("< HTTP/1.1 100 Continue"), std::string::npos) << r.err;
  EXPECT_TRUE(up2.seen().empty());
  expect_no_secret(r);
}

// Denied on its head: answered at once, the body never asked for (no 100).
TEST_F(GuardDlpTest, ExpectContinueDeniedOnItsHeadIsAnsweredWithoutWaitingForTheBody) {
  BodyUpstream up;
  const auto start = std::chrono::steady_clock::now();
  auto r = guard({"--enforce", "--terminate-tls", "--dlp", "--deny", "/v1/upload"}, up.url("/v1/upload"),
                 {"-v", "-H", "Expect: 100-continue", "--expect100-timeout", "30"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out.substr(r.out.rfind('[')), "[403]") << r.out;
  EXPECT_EQ(r.err.find("100 Continue"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s) << "curl waited for a 100 it was never to get";
  EXPECT_TRUE(up.seen().empty());
}

}  // namespace
