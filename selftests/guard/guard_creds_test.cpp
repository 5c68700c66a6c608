// faultctl guard --creds end to end: the real faultctl (as nobody when root)
// running the pinned openai SDK, whose own key is a stand-in that opens nothing, against a
// loopback HTTPS stand-in that accepts only the real key. The guard sets it
// from an env or file source; a missing secret denies (nothing reaches the
// stand-in); a removed file stops the injection within the TTL; bad files
// name their field (exit 2). The secret is searched for in the command's
// environment, the guard's output and the activity log.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/tls/tls_harness.h"
#include "userspace/proxy/tls_ca.h"

namespace {

using fltest::CommandResult;
using namespace std::chrono_literals;

const std::string kCredsFaultctl = FAULTCTL_PATH;
const std::string kSdkDir = LLM_SDK_DIR;
const std::string kStandin = std::string(GUARD_TEST_DIR) + "/creds_https_standin.py";

std::string slurp(const std::string& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class GuardCredsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    std::mt19937_64 rng(std::random_device{}());
    char hex[33];
    std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()));
    secret_ = std::string("sk-real-") + hex;
    env_ = fltest::guard_env(dir_.path(), {"FAULTLINE_STATE_DIR=" + dir_.file("state"), "CREDS_REAL_KEY=" + secret_});
    fltest::write_file(dir_.file("standin-key"), secret_);
    ASSERT_EQ(::chmod(dir_.file("standin-key").c_str(), 0600), 0);
  }

  // The stand-in, with a leaf of a CA the guard is told to trust (--upstream-ca).
  bool start_standin() {
    auto ca = faultline::CertificateAuthority::generate();
    if (!ca.ok()) return false;
    auto leaf = ca->mint_leaf("127.0.0.1");
    if (!leaf.ok()) return false;
    fltest::write_file(dir_.file("upstream-ca.pem"), ca->cert_pem());
    (void)::chmod(dir_.file("upstream-ca.pem").c_str(), 0644);
    fltest::write_file(dir_.file("standin.pem"), (*leaf)->cert_pem());
    fltest::write_file(dir_.file("standin.key"), fltest::private_key_pem((*leaf)->key()));
    standin_.emplace(fltest::ChildProcess::spawn(
        {"python3", kStandin, dir_.file("standin.pem"), dir_.file("standin.key"), dir_.file("standin-key")}));
    auto line = standin_->wait_line_starting("PORT ", 10s);
    if (!line) return false;
    port_ = std::stoi(line->substr(5));
    return true;
  }
  std::string base() const { return "https://127.0.0.1:" + std::to_string(port_); }
  int standin_requests(const std::string& verdict) {
    const std::string& out = standin_->out();
    int n = 0;
    const std::string needle = "REQ auth=" + verdict;
    for (size_t at = out.find(needle); at != std::string::npos; at = out.find(needle, at + 1)) ++n;
    return n;
  }

  void write_creds(const std::string& secret_source, const std::string& host = "") {
    const std::string h = host.empty() ? "127.0.0.1:" + std::to_string(port_) : host;
    fltest::write_file(dir_.file("creds.json"), R"({"credentials":[{"host":")" + h +
                                                    R"(","header":"Authorization","value":"Bearer ${SECRET}",)"
                                                    R"("secret":)" +
                                                    secret_source + "}]}");
    ASSERT_EQ(::chmod(dir_.file("creds.json").c_str(), 0644), 0);
  }

  CommandResult guard(std::vector<std::string> flags, std::vector<std::string> command) {
    std::vector<std::string> argv = {kCredsFaultctl,
                                     "guard",
                                     "--enforce",
                                     "--upstream-ca",
                                     dir_.file("upstream-ca.pem"),
                                     "--creds",
                                     dir_.file("creds.json"),
                                     "--json-log",
                                     dir_.file("activity.jsonl")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.emplace_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    return fltest::run_command(fltest::as_nobody(std::move(argv)), {.env = env_}, 90s);
  }
  std::vector<std::string> sdk(const std::string& mode, const std::string& env_out = "") {
    std::vector<std::string> c = {"node", kSdkDir + "/guard_creds_sdk_test.js", base(), mode};
    if (!env_out.empty()) c.push_back(env_out);
    return c;
  }

  void expect_no_secret(const CommandResult& r) {
    EXPECT_EQ(r.out.find(secret_), std::string::npos) << "stdout carries the secret";
    EXPECT_EQ(r.err.find(secret_), std::string::npos) << "stderr carries the secret";
    EXPECT_EQ(slurp(dir_.file("activity.jsonl")).find(secret_), std::string::npos) << "the activity log carries it";
  }

  bool sdk_installed() { return ::access((kSdkDir + "/node_modules/openai").c_str(), R_OK) == 0; }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
  std::string secret_;
  std::optional<fltest::ChildProcess> standin_;
  int port_ = 0;
};

TEST_F(GuardCredsTest, AnEnvSecretIsSetOnTheSdkCallsAndTheCommandNeverHasIt) {
  if (!sdk_installed())
    GTEST_SKIP() << "*** SKIPPED: " << kSdkDir << "/node_modules missing: run scripts/install-deps.sh ***";
  ASSERT_TRUE(start_standin()) << standin_->describe();
  write_creds(R"({"env":"CREDS_REAL_KEY"})");
  auto r = guard({}, sdk("ok", dir_.file("child-env.json")));
  ASSERT_TRUE(r.status.is(0)) << r.describe() << standin_->describe();
  EXPECT_NE(r.out.find("ok openai: the stand-in accepted the injected key"), std::string::npos) << r.out;
  EXPECT_EQ(standin_requests("ok"), 1) << standin_->out();
  EXPECT_EQ(standin_requests("bad") + standin_requests("none"), 0) << standin_->out();
  const std::string child_env = slurp(dir_.file("child-env.json"));
  ASSERT_FALSE(child_env.empty());
  EXPECT_EQ(child_env.find(secret_), std::string::npos) << "the command's environment carries the secret";
  EXPECT_EQ(child_env.find("CREDS_REAL_KEY"), std::string::npos) << child_env;
  EXPECT_NE(r.err.find("--creds: the guard sets 127.0.0.1:" + std::to_string(port_) +
                       " (Authorization from env CREDS_REAL_KEY)"),
            std::string::npos)
      << r.err;
  expect_no_secret(r);
}

TEST_F(GuardCredsTest, AMissingSecretDeniesTheCallAndNothingIsSentBare) {
  if (!sdk_installed())
    GTEST_SKIP() << "*** SKIPPED: " << kSdkDir << "/node_modules missing: run scripts/install-deps.sh ***";
  ASSERT_TRUE(start_standin()) << standin_->describe();
  write_creds(R"({"file":")" + dir_.file("no-such-key") + R"("})");
  auto r = guard({}, sdk("denied"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("ok openai: PermissionDeniedError"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok openai: exactly one attempt"), std::string::npos) << r.out;
  EXPECT_EQ(standin_->out().find("REQ "), std::string::npos) << standin_->out();
  EXPECT_NE(r.err.find("credentials[0] (127.0.0.1): missing, its requests are denied: cannot read " +
                       dir_.file("no-such-key")),
            std::string::npos)
      << r.err;
  bool denied = false;
  for (const auto& e : fltest::activity_of_kind(dir_.file("activity.jsonl"), "request"))
    denied = denied || (e["rule"] == "creds" && e["verdict"] == "deny");
  EXPECT_TRUE(denied) << slurp(dir_.file("activity.jsonl"));
}

// The secret's file is removed while the command runs: within the TTL (1 s
// here) the next call is denied, never sent without the key.
TEST_F(GuardCredsTest, ARemovedFileSecretStopsTheInjectionWithinTheTtl) {
  if (!sdk_installed())
    GTEST_SKIP() << "*** SKIPPED: " << kSdkDir << "/node_modules missing: run scripts/install-deps.sh ***";
  ASSERT_TRUE(start_standin()) << standin_->describe();
  fltest::write_file(dir_.file("key-file"), secret_ + "\n");
  ASSERT_EQ(::chmod(dir_.file("key-file").c_str(), 0644), 0);
  write_creds(R"({"file":")" + dir_.file("key-file") + R"("})");
  auto quote = [](const std::vector<std::string>& words) {
    std::string s;
    for (const auto& w : words) s += "'" + w + "' ";
    return s;
  };
  auto r = guard({"--creds-ttl", "1s"},
                 {"sh", "-c",
                  quote(sdk("ok")) + "&& rm -f '" + dir_.file("key-file") + "' && sleep 3 && " + quote(sdk("denied"))});
  ASSERT_TRUE(r.status.is(0)) << r.describe() << standin_->describe();
  EXPECT_NE(r.out.find("ok openai: the stand-in accepted the injected key"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok openai: PermissionDeniedError"), std::string::npos) << r.out;
  EXPECT_EQ(standin_requests("ok"), 1) << standin_->out();
  EXPECT_EQ(standin_requests("bad") + standin_requests("none"), 0) << standin_->out();
  expect_no_secret(r);
}

// A request held for approval gets its credential when it is approved (the
// guard completes it later, through the credentials judge).
TEST_F(GuardCredsTest, AnApprovedCallGetsItsCredentialWhenReleased) {
  if (!sdk_installed())
    GTEST_SKIP() << "*** SKIPPED: " << kSdkDir << "/node_modules missing: run scripts/install-deps.sh ***";
  ASSERT_TRUE(start_standin()) << standin_->describe();
  write_creds(R"({"env":"CREDS_REAL_KEY"})");
  std::vector<std::string> argv = {kCredsFaultctl,
                                   "guard",
                                   "--enforce",
                                   "--upstream-ca",
                                   dir_.file("upstream-ca.pem"),
                                   "--creds",
                                   dir_.file("creds.json"),
                                   "--json-log",
                                   dir_.file("activity.jsonl"),
                                   "--approve",
                                   "127.0.0.1:" + std::to_string(port_),
                                   "--"};
  for (const std::string& w : sdk("ok")) argv.push_back(w);
  auto g = fltest::ChildProcess::spawn(fltest::as_nobody(argv), {.env = env_});
  ASSERT_TRUE(g.wait_for("held for approval ", 60s, fltest::Stream::kStderr)) << g.describe();
  std::smatch m;
  const std::string err = g.err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("held for approval ([0-9]+\\.[0-9]+)"))) << err;
  EXPECT_EQ(standin_->out().find("REQ "), std::string::npos) << standin_->out();
  auto ok =
      fltest::run_command(fltest::as_nobody({kCredsFaultctl, "approvals", "approve", m[1].str()}), {.env = env_}, 30s);
  ASSERT_TRUE(ok.status.is(0)) << ok.describe();
  auto r = g.finish(60s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("ok openai: the stand-in accepted the injected key"), std::string::npos) << r.out;
  EXPECT_EQ(standin_requests("ok"), 1) << standin_->out();
  expect_no_secret(r);
}

TEST_F(GuardCredsTest, PlainHttpToACredentialsHostIsDenied) {
  ASSERT_TRUE(start_standin()) << standin_->describe();
  write_creds(R"({"literal":")" + secret_ + R"("})", "127.0.0.1:9");
  auto r = guard({}, {"curl", "-sS", "--max-time", "20", "-w", "[%{http_code}]", "http://127.0.0.1:9/v1/x"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("[403]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sent over HTTPS only"), std::string::npos) << r.out;
  expect_no_secret(r);
}

TEST_F(GuardCredsTest, BadFilesNameTheFieldAndNothingRuns) {
  struct Case {
    std::string json, expect;
  };
  const std::vector<Case> cases = {
      {R"({"credentials":[{"host":"api.openai.com","value":"Bearer ${SECRET}","secret":{"env":"K"}}]})",
       "credentials[0].header: missing"},
      {R"({"credentials":[{"host":"api.openai.com","header":"Authorization","value":"Bearer ${SECRET}",)"
       R"("secret":{"kms":"arn:aws:secretsmanager:eu-west-1:1:secret:k"}}]})",
       "credentials[0].secret.kms: KMS sources (AWS, GCP, Azure) are not built"},
      {R"({"credentials":[{"host":"api.openai.com","header":"Authorization","value":"Bearer","secret":{"env":"K"}}]})",
       "credentials[0].value: holds no ${SECRET}"},
      {R"({"credentials":[{"host":"a.example","header":"X-Key","value":"${SECRET}","secret":{"env":"K"}},)"
       R"({"host":"b.example:99999","header":"X-Key","value":"${SECRET}","secret":{"env":"K"}}]})",
       "credentials[1].host: 'b.example:99999': the port is a number from 1 to 65535"},
      {R"({"credentials":[{"host":"a.example","header":"X-Key","value":"${SECRET}","secret":{"env":"K"},"ttl":3}]})",
       "credentials[0].ttl: unknown field"},
      {R"({"credentials": [)", "not JSON at byte"},
  };
  for (const Case& c : cases) {
    fltest::write_file(dir_.file("creds.json"), c.json);
    ASSERT_EQ(::chmod(dir_.file("creds.json").c_str(), 0644), 0);
    auto r = guard({}, {"sh", "-c", "echo ran"});
    EXPECT_TRUE(r.status.is(2)) << c.json << "\n" << r.describe();
    EXPECT_NE(r.err.find("--creds " + dir_.file("creds.json") + ": " + c.expect), std::string::npos) << c.json << "\n"
                                                                                                     << r.err;
    EXPECT_EQ(r.out.find("ran"), std::string::npos) << r.out;
  }
  write_creds(R"({"env":"CREDS_REAL_KEY"})", "api.openai.com");
  auto r = guard({"--creds-ttl", "0s"}, {"true"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--creds-ttl 0s: between 1s and 24h"), std::string::npos) << r.err;
}

}  // namespace
