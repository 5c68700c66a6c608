// faultctl guard --honeytokens end to end: the real faultctl (as nobody when
// root) runs a python3 command that reads the decoys it was given (its
// environment and the decoy credentials file) and sends them to a loopback
// upstream raw, base64-encoded, URL-encoded and JSON-escaped. Each is a
// critical finding: denied with --enforce (nothing reaches the upstream),
// logged and forwarded in monitor. Real credentials are never shadowed, and
// the decoy file goes with the guard.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/tls/tls_harness.h"
#include "userspace/guard/dlp_validators.h"

namespace {

using fltest::CommandResult;
using fltest::UniqueFd;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kHoneyFaultctl = FAULTCTL_PATH;

// Prints the decoys it sees as JSON, then sends each way of carrying them
// (one request each, through the guard's proxy) and prints each status.
const char* kHoneyAgent = R"PY(
import base64, json, os, sys, urllib.parse, urllib.request, urllib.error
base = sys.argv[1]
env = {k: os.environ.get(k, '') for k in ('AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'GITHUB_TOKEN',
                                          'ANTHROPIC_ADMIN_KEY', 'AWS_SHARED_CREDENTIALS_FILE')}
f = env['AWS_SHARED_CREDENTIALS_FILE']
env['file'] = open(f).read() if f and os.path.exists(f) else ''
print(json.dumps(env), flush=True)
if len(sys.argv) > 2 and sys.argv[2] == 'env-only':
    sys.exit(0)
def send(what, path, body=None, headers={}):
    req = urllib.request.Request(base + path, data=body, headers=headers, method='POST' if body else 'GET')
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            print(what, r.status, flush=True)
    except urllib.error.HTTPError as e:
        print(what, e.code, flush=True)
send('benign', '/ok', b'hello')
send('raw-header', '/raw', b'x', {'X-Debug': env['AWS_ACCESS_KEY_ID']})
send('base64', '/b64', base64.b64encode(('token=' + env['GITHUB_TOKEN']).encode()))
send('urlencoded', '/q?s=' + urllib.parse.quote(env['AWS_SECRET_ACCESS_KEY'], safe=''))
esc = ''.join('\\u%04x' % ord(c) for c in env['ANTHROPIC_ADMIN_KEY'])
send('json-escaped', '/json', ('{"k":"' + esc + '"}').encode(), {'Content-Type': 'application/json'})
)PY";

class CountingUpstream {
 public:
  CountingUpstream()
      : server_([this](UniqueFd fd) {
          auto read = fltest::read_one_request(fd.get());
          if (!read) return;
          requests_.fetch_add(1);
          const std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
          (void)::send(fd.get(), resp.data(), resp.size(), MSG_NOSIGNAL);
        }) {}
  [[nodiscard]] std::string base() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  [[nodiscard]] int requests() const { return requests_.load(); }

 private:
  std::atomic<int> requests_{0};
  fltest::ScriptServer server_;
};

class GuardHoneytokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    fltest::write_file(dir_.file("agent.py"), kHoneyAgent);
    ASSERT_EQ(::chmod(dir_.file("agent.py").c_str(), 0644), 0);
    ASSERT_EQ(::mkdir(dir_.file("home").c_str(), 0777), 0);
    ASSERT_EQ(::chmod(dir_.file("home").c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path(), {"HOME=" + dir_.file("home")});
  }

  CommandResult guard(std::vector<std::string> flags, std::vector<std::string> more_env = {},
                      std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {kHoneyFaultctl, "guard", "--honeytokens"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "python3", dir_.file("agent.py")});
    argv.insert(argv.end(), args.begin(), args.end());
    argv = fltest::as_nobody(std::move(argv));
    std::vector<std::string> env = env_;
    env.insert(env.end(), more_env.begin(), more_env.end());
    return fltest::run_command(argv, {.env = env}, 90s);
  }

  static Json decoys(const CommandResult& r) {
    std::istringstream in(r.out);
    std::string first;
    std::getline(in, first);
    return Json::parse(first, nullptr, false);
  }
  static std::string status_of(const CommandResult& r, const std::string& what) {
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(what + " ", 0) == 0) return line.substr(what.size() + 1);
    return "";
  }
  std::vector<Json> lines_of(const std::string& kind) {
    return fltest::activity_of_kind(dir_.file("activity.jsonl"), kind);
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(GuardHoneytokenTest, FreshDecoysWithRealShapesAreInTheEnvironmentAndADecoyFileThatGoesAfter) {
  CountingUpstream up;
  auto r = guard({}, {}, {up.base(), "env-only"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const Json d = decoys(r);
  ASSERT_TRUE(d.is_object()) << r.out;
  const std::string id = d["AWS_ACCESS_KEY_ID"], secret = d["AWS_SECRET_ACCESS_KEY"], gh = d["GITHUB_TOKEN"],
                    ant = d["ANTHROPIC_ADMIN_KEY"], file = d["AWS_SHARED_CREDENTIALS_FILE"];
  EXPECT_EQ(id.size(), 20u);
  EXPECT_EQ(id.rfind("AKIA", 0), 0u) << id;
  EXPECT_EQ(secret.size(), 40u);
  ASSERT_EQ(gh.size(), 40u);
  EXPECT_EQ(gh.rfind("ghp_", 0), 0u);
  EXPECT_TRUE(faultline::base62_crc32_checksum_valid(gh.substr(4))) << gh;  // GitHub's own checksum holds
  EXPECT_EQ(ant.rfind("sk-ant-api03-", 0), 0u) << ant;
  EXPECT_EQ(d["file"], "[default]\naws_access_key_id = " + id + "\naws_secret_access_key = " + secret + "\n");
  EXPECT_NE(r.err.find("--honeytokens: decoys planted in AWS_ACCESS_KEY_ID"), std::string::npos) << r.err;
  EXPECT_NE(::access(file.c_str(), F_OK), 0) << file << " outlived the guard";
  // Fresh each run.
  auto again = guard({}, {}, {up.base(), "env-only"});
  ASSERT_TRUE(again.status.is(0)) << again.describe();
  EXPECT_NE(decoys(again)["AWS_ACCESS_KEY_ID"], id);
}

TEST_F(GuardHoneytokenTest, EnforcingDeniesEveryEncodingAndNothingReachesTheUpstream) {
  CountingUpstream up;
  auto r = guard({"--enforce"}, {}, {up.base()});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(status_of(r, "benign"), "200") << r.out;
  for (const char* what : {"raw-header", "base64", "urlencoded", "json-escaped"})
    EXPECT_EQ(status_of(r, what), "403") << what << "\n" << r.out << r.err;
  EXPECT_EQ(up.requests(), 1);  // the benign one
  const Json d = decoys(r);
  for (const char* kind : {"aws_access_key", "github_token", "aws_secret_key", "anthropic_key"}) {
    bool seen = false;
    for (const Json& l : lines_of("honeytoken")) seen |= l.value("rule", "") == std::string("honeytoken/") + kind;
    EXPECT_TRUE(seen) << kind;
  }
  EXPECT_NE(r.err.find("HONEYTOKEN (critical): the decoy github_token in body"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-> deny (rule honeytoken: a honeytoken (decoy credential) in the request: aws_secret_key)"),
            std::string::npos)
      << r.err;
  // The decoys are never written out by the guard itself.
  std::ifstream in(dir_.file("activity.jsonl"));
  const std::string activity(std::istreambuf_iterator<char>(in), {});
  for (const char* k : {"AWS_ACCESS_KEY_ID", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "ANTHROPIC_ADMIN_KEY"}) {
    EXPECT_EQ(r.err.find(d[k].get<std::string>()), std::string::npos) << k;
    EXPECT_EQ(activity.find(d[k].get<std::string>()), std::string::npos) << k;
  }
}

TEST_F(GuardHoneytokenTest, MonitorForwardsAndReportsTheCriticalFinding) {
  CountingUpstream up;
  auto r = guard({}, {}, {up.base()});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  for (const char* what : {"raw-header", "base64", "urlencoded", "json-escaped"})
    EXPECT_EQ(status_of(r, what), "200") << what << "\n" << r.out;
  EXPECT_EQ(up.requests(), 5);
  EXPECT_EQ(lines_of("honeytoken").size(), 4u);
  for (const Json& l : lines_of("honeytoken")) EXPECT_EQ(l.value("verdict", ""), "allow") << l.dump();
  EXPECT_NE(r.err.find("would deny (rule honeytoken"), std::string::npos) << r.err;
}

TEST_F(GuardHoneytokenTest, RealCredentialsAreNeverShadowed) {
  CountingUpstream up;
  ASSERT_EQ(::mkdir(dir_.file("home/.aws").c_str(), 0755), 0);
  fltest::write_file(dir_.file("home/.aws/credentials"), "[default]\naws_access_key_id = mine\n");
  auto r = guard({}, {"GITHUB_TOKEN=my-own-token"}, {up.base(), "env-only"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const Json d = decoys(r);
  EXPECT_EQ(d["GITHUB_TOKEN"], "my-own-token");
  EXPECT_EQ(d["AWS_ACCESS_KEY_ID"], "");
  EXPECT_EQ(d["AWS_SHARED_CREDENTIALS_FILE"], "");
  EXPECT_EQ(d["ANTHROPIC_ADMIN_KEY"].get<std::string>().rfind("sk-ant-", 0), 0u);
  EXPECT_NE(r.err.find("not planted: the AWS pair (AWS credentials are configured: never shadowed); GITHUB_TOKEN"),
            std::string::npos)
      << r.err;
  std::ifstream in(dir_.file("home/.aws/credentials"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "[default]\naws_access_key_id = mine\n");
}

}  // namespace
