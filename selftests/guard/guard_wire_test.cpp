// faultctl guard as the AI-agent guard, as a user would run it: the real
// faultctl (as nobody when the test runs as root) with real curl and python3
// through its proxy variables: allow, deny (403 JSON, the upstream sees
// nothing), path rules on terminated HTTPS, the start-time refusals, monitor,
// approvals (approved within a second, timed out, withdrawn), the activity log
// verified; as root, TCP bypassing the proxy judged and UDP refused. Loopback only.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/clock.h"
#include "selftests/lib/require_root.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/proxy/seen_upstream.h"
#include "selftests/tls/tls_harness.h"
#include "userspace/proxy/tls_ca.h"

namespace {

using fltest::ChildProcess;
using fltest::CommandResult;
using fltest::UniqueFd;
using namespace std::chrono_literals;

const std::string kFaultctl = FAULTCTL_PATH;

using CountingUpstream = fltest::SeenUpstream;

// faultctl as an unprivileged user: nobody through setpriv when we are root.
std::vector<std::string> as_user(std::vector<std::string> argv) { return fltest::as_nobody(std::move(argv)); }

class GuardWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // nobody writes the activity log, the CA and the trust files here.
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path(),
                             {"SSL_CERT_FILE=", "CURL_CA_BUNDLE=", "FAULTLINE_STATE_DIR=" + dir_.file("state")});
  }

  std::vector<std::string> guard_argv(std::vector<std::string> flags, std::vector<std::string> cmd, bool user = true) {
    std::vector<std::string> argv = {kFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return user ? as_user(argv) : argv;
  }
  CommandResult guard(std::vector<std::string> flags, std::vector<std::string> cmd, bool user = true) {
    return fltest::run_command(guard_argv(std::move(flags), std::move(cmd), user), {.env = env_}, 60s);
  }
  ChildProcess guard_child(std::vector<std::string> flags, std::vector<std::string> cmd) {
    return ChildProcess::spawn(guard_argv(std::move(flags), std::move(cmd)), {.env = env_});
  }
  CommandResult faultctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {kFaultctl};
    argv.insert(argv.end(), args.begin(), args.end());
    return fltest::run_command(as_user(argv), {.env = env_}, 20s);
  }
  static std::vector<std::string> curl(const std::string& url) {
    return {"curl", "-sS", "--max-time", "20", "-w", "[%{http_code}]", url};
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

// The body before "[code]" as JSON.
nlohmann::json body_json(const std::string& out) {
  return nlohmann::json::parse(out.substr(0, out.rfind('[')), nullptr, false);
}

TEST_F(GuardWireTest, AllowedHostReachesItsUpstreamAsAUser) {
  CountingUpstream up;
  auto r = guard({"--enforce", "--default-deny", "--allow", "127.0.0.1:" + std::to_string(up.port())},
                 curl(up.url("/ok?x=1")));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "upstream saw GET /ok?x=1 HTTP/1.1[200]");
  EXPECT_EQ(up.requests(), 1);
  EXPECT_NE(r.err.find("a process that ignores the proxy variables is NOT seen"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-> allow (rule --allow 127.0.0.1:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("requests 1  allowed 1  denied 0"), std::string::npos) << r.err;
}

TEST_F(GuardWireTest, DeniedHostGets403JsonAndTheUpstreamSeesNothing) {
  CountingUpstream up;
  const std::string host = "127.0.0.1:" + std::to_string(up.port());
  auto r = guard({"--enforce", "--deny", host}, curl(up.url("/anything")));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  ASSERT_EQ(r.out.substr(r.out.rfind('[')), "[403]") << r.out;
  auto j = body_json(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["error"], "denied by policy");
  EXPECT_EQ(j["rule"], "--deny " + host);
  EXPECT_FALSE(j["reason"].get<std::string>().empty());
  EXPECT_EQ(j["request_id"].get<std::string>().rfind("req_", 0), 0u) << j.dump();
  EXPECT_EQ(up.requests(), 0);
}

TEST_F(GuardWireTest, PythonUrllibIsJudgedThroughTheVariables) {
  CountingUpstream up;
  const std::string script =
      "import urllib.request, urllib.error, sys\n"
      "try:\n"
      "  urllib.request.urlopen(sys.argv[1], timeout=20)\n"
      "  print('reached')\n"
      "except urllib.error.HTTPError as e:\n"
      "  print(e.code, e.read().decode())\n";
  auto r = guard({"--enforce", "--default-deny"}, {"python3", "-c", script, up.url("/x")});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out.rfind("403 ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\"rule\":\"\""), std::string::npos) << r.out;  // the default decided
  EXPECT_EQ(up.requests(), 0);
}

TEST_F(GuardWireTest, PathRuleWithoutTerminateTlsIsRefusedAtStart) {
  auto r = guard({"--enforce", "--deny", "/secrets/"}, {"true"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("rule --deny /secrets/"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--terminate-tls"), std::string::npos) << r.err;
}

TEST_F(GuardWireTest, CidrRuleAsAUserIsRefusedAtStart) {
  auto r = guard({"--enforce", "--deny", "10.0.0.0/8"}, {"true"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("needs root"), std::string::npos) << r.err;
}

TEST_F(GuardWireTest, PathRuleJudgesTerminatedHttps) {
  auto ours = faultline::CertificateAuthority::generate();
  ASSERT_TRUE(ours.ok());
  auto leaf = ours->mint_leaf("127.0.0.1");
  ASSERT_TRUE(leaf.ok());
  fltest::write_file(dir_.file("upstream-ca.pem"), ours->cert_pem());
  ASSERT_EQ(::chmod(dir_.file("upstream-ca.pem").c_str(), 0644), 0);
  fltest::HttpsUpstream up(dir_, (*leaf)->cert_pem(), fltest::private_key_pem((*leaf)->key()));
  ASSERT_TRUE(up.started()) << up.describe();
  const std::string base = "https://127.0.0.1:" + std::to_string(up.port());
  auto r = guard({"--enforce", "--terminate-tls", "--upstream-ca", dir_.file("upstream-ca.pem"), "--deny", "/secrets/"},
                 {"sh", "-c",
                  "curl -sS --max-time 20 -w '[%{http_code}]\\n' " + base +
                      "/public/a; curl -sS --max-time 20 -w '[%{http_code}]' " + base + "/v1/secrets/k"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const std::string first = r.out.substr(0, r.out.find('\n'));
  const std::string second = r.out.substr(r.out.find('\n') + 1);
  EXPECT_NE(first.find("[200]"), std::string::npos) << r.out;
  ASSERT_EQ(second.substr(second.rfind('[')), "[403]") << r.out;
  auto j = body_json(second);
  EXPECT_EQ(j["rule"], "--deny /secrets/") << second;
  EXPECT_EQ(up.requests(), 1);  // only /public/a
  EXPECT_NE(r.err.find("the command trusts it through"), std::string::npos) << r.err;
}

TEST_F(GuardWireTest, MonitorForwardsLogsWouldDenyAndTheActivityLogVerifies) {
  CountingUpstream up;
  const std::string host = "127.0.0.1:" + std::to_string(up.port());
  const std::string log = dir_.file("activity.jsonl");
  auto r = guard({"--deny", host, "--identity", "agent-7", "--json-log", log},
                 {"sh", "-c", "curl -sS --max-time 20 " + up.url("/a") + "; curl -sS --max-time 20 " + up.url("/b")});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "upstream saw GET /a HTTP/1.1upstream saw GET /b HTTP/1.1");
  EXPECT_EQ(up.requests(), 2);
  EXPECT_NE(r.err.find("would deny (rule --deny " + host), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("would have denied 2"), std::string::npos) << r.err;
  std::string text;
  {
    std::ifstream in(log);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto first = nlohmann::json::parse(text.substr(0, text.find('\n')));
  EXPECT_EQ(first["identity"], "agent-7");
  EXPECT_EQ(first["verdict"], "deny");
  EXPECT_EQ(first["rule"], "--deny " + host);
  EXPECT_EQ(first["path"], "/a");
  auto v = faultctl({"activity", "verify", log});
  EXPECT_TRUE(v.status.is(0)) << v.describe();
  EXPECT_NE(v.out.find("intact, 2 entries of 1 identities"), std::string::npos) << v.out;
}

// The id the guard printed for a held request ("held for approval 123.1").
std::optional<std::string> held_id(ChildProcess& g) {
  if (!g.wait_for("held for approval ", 20s, fltest::Stream::kStderr)) return std::nullopt;
  std::smatch m;
  const std::string err = g.err();
  if (!std::regex_search(err, m, std::regex("held for approval ([0-9]+\\.[0-9]+)"))) return std::nullopt;
  return m[1].str();
}

TEST_F(GuardWireTest, HeldRequestApprovedReachesItsUpstreamWithinASecond) {
  CountingUpstream up;
  auto g = guard_child({"--enforce", "--approve", "127.0.0.1:" + std::to_string(up.port())}, curl(up.url("/deploy")));
  auto id = held_id(g);
  ASSERT_TRUE(id) << g.describe();
  auto list = faultctl({"approvals", "list"});
  ASSERT_TRUE(list.status.is(0)) << list.describe();
  EXPECT_NE(list.out.find(*id), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("/deploy"), std::string::npos) << list.out;
  EXPECT_EQ(up.requests(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto ok = faultctl({"approvals", "approve", *id});
  ASSERT_TRUE(ok.status.is(0)) << ok.describe();
  EXPECT_EQ(ok.out, *id + ": approved\n");
  auto end = g.finish(20s);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(end.status.is(0)) << end.describe();
  EXPECT_EQ(end.out, "upstream saw GET /deploy HTTP/1.1[200]");
  EXPECT_LT(took, 1500ms);  // approve's own process start included
  EXPECT_NE(end.err.find("held 1  approved 1"), std::string::npos) << end.err;
}

TEST_F(GuardWireTest, HeldRequestDeniedByAPersonGetsTheReason) {
  CountingUpstream up;
  auto g = guard_child({"--enforce", "--terminate-tls", "--approve", "POST 127.0.0.1:" + std::to_string(up.port())},
                       {"curl", "-sS", "--max-time", "20", "-w", "[%{http_code}]", "-d", "x", up.url("/prod")});
  auto id = held_id(g);
  ASSERT_TRUE(id) << g.describe();
  auto no = faultctl({"approvals", "deny", *id, "--reason", "not during the freeze"});
  ASSERT_TRUE(no.status.is(0)) << no.describe();
  auto end = g.finish(20s);
  ASSERT_TRUE(end.status.is(0)) << end.describe();
  EXPECT_NE(end.out.find("not during the freeze"), std::string::npos) << end.out;
  EXPECT_NE(end.out.find("[403]"), std::string::npos) << end.out;
  EXPECT_EQ(up.requests(), 0);
  auto again = faultctl({"approvals", "approve", *id});
  EXPECT_TRUE(again.status.is(1)) << again.describe();
}

TEST_F(GuardWireTest, ApprovalTimeoutDenies) {
  CountingUpstream up;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = guard({"--enforce", "--approve-timeout", "1s", "--approve", "127.0.0.1:" + std::to_string(up.port())},
                 curl(up.url("/slow")));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1s);
  ASSERT_NE(r.out.find("[403]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no approval within the timeout"), std::string::npos) << r.out;
  EXPECT_EQ(up.requests(), 0);
}

TEST_F(GuardWireTest, ClientThatLeavesWithdrawsItsHeldRequest) {
  CountingUpstream up;
  auto g = guard_child(
      {"--enforce", "--approve", "127.0.0.1:" + std::to_string(up.port())},
      {"sh", "-c", "curl -sS --max-time 1 " + up.url("/w") + "; sleep 1; " + kFaultctl + " approvals list"});
  auto end = g.finish(30s);
  EXPECT_NE(end.err.find("-> withdrawn (the client went away)"), std::string::npos) << end.describe();
  EXPECT_NE(end.out.find("nothing waits for approval"), std::string::npos) << end.describe();
  EXPECT_EQ(up.requests(), 0);
}

TEST_F(GuardWireTest, SighupReloadsThePolicyFileAndABadFileKeepsTheOld) {
  CountingUpstream up;
  const std::string file = dir_.file("guard.json");
  fltest::write_file(file, R"({"mode":"enforce","rules":[{"name":"loopback","action":"allow","host":"127.0.0.1"}]})");
  ASSERT_EQ(::chmod(file.c_str(), 0666), 0);
  const std::string get = "curl -sS --max-time 20 -o /dev/null -w '%{http_code} ' " + up.url("/r") + "; ";
  const std::string hup = "kill -HUP $PPID; sleep 0.5; ";
  auto r = guard(
      {"--policy", file},
      {"sh", "-c",
       get + R"(printf '{"mode":"enforce","rules":[{"name":"no-loopback","action":"deny","host":"127.0.0.1"}]}' > )" +
           file + "; " + hup + get + "printf 'rules: [' > " + file + "; " + hup + get});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "200 403 403 ");
  EXPECT_EQ(up.requests(), 1);
  EXPECT_NE(r.err.find("SIGHUP: policy reloaded from " + file + ": enforce, default allow, 1 rule"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("SIGHUP: the policy stays as it was: " + file + ":"), std::string::npos) << r.err;
}

TEST_F(GuardWireTest, ModelSdksRaiseTheirPermissionErrorOnceAndNothingGoesUpstream) {
  const std::string sdk_dir = LLM_SDK_DIR;
  if (::access((sdk_dir + "/node_modules/@anthropic-ai/sdk").c_str(), R_OK) != 0)
    GTEST_SKIP() << "*** SKIPPED: " << sdk_dir << "/node_modules missing: run scripts/install-deps.sh ***";
  CountingUpstream standin;
  auto r = guard({"--enforce", "--deny", "127.0.0.1:" + std::to_string(standin.port())},
                 {"node", sdk_dir + "/guard_sdk_test.js", "http://127.0.0.1:" + std::to_string(standin.port())});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("ok anthropic: exactly one attempt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok openai: exactly one attempt"), std::string::npos) << r.out;
  EXPECT_EQ(standin.requests(), 0);
}

// As root a connection that ignores the variables is captured transparently
// and judged (guard_capture_test.cpp has the rules); what the proxy cannot
// take (UDP other than DNS) is refused in the kernel.
TEST_F(GuardWireTest, RootJudgesTcpThatBypassesTheProxyAndRefusesUdp) {
  FL_REQUIRE_ROOT("a cgroup and cgroup BPF programs");
  CountingUpstream up;
  const std::string udp =
      "import socket\n"
      "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "try:\n"
      "  s.sendto(b'x', ('127.0.0.1', 9))\n"
      "  print('udp sent')\n"
      "except OSError as e:\n"
      "  print('udp refused', e.errno)\n";
  // --identity asks for the request guard as root (a CIDR-only guard is the kernel's alone).
  auto r = guard({"--enforce", "--identity", "root-test"},
                 {"sh", "-c",
                  "curl -sS --noproxy '*' --max-time 20 " + up.url("/bypass") + "; echo; python3 -c \"" + udp +
                      "\"; curl -sS --max-time 20 " + up.url("/proxied")},
                 /*user=*/false);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("upstream saw GET /bypass"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("udp refused 1"), std::string::npos) << r.out;  // EPERM
  EXPECT_NE(r.out.find("upstream saw GET /proxied"), std::string::npos) << r.out;
  EXPECT_EQ(up.requests(), 2);
  EXPECT_NE(r.err.find("GET " + up.url("/bypass") + " (redirected, to 127.0.0.1:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("other egress (UDP, other protocols) is refused in the kernel"), std::string::npos) << r.err;
}

// --- LLM facts, usage and budgets ---------------------------------------------

// A stand-in model server: reads one request (head and Content-Length body),
// keeps it, waits `delay`, and answers as the provider of its path would:
// /v1/messages a JSON message with usage (in 10, out 5), or with "stream":
// true an Anthropic SSE stream (chunked, 100 ms between events) saying
// "Hello there"; /v1/chat/completions
// with "stream": true an SSE stream (chunked) whose usage chunk is sent only
// when the request asked for it (include_usage), else a JSON completion.
class LlmStandIn {
 public:
  explicit LlmStandIn(std::chrono::milliseconds delay = 0ms)
      : delay_(delay), server_([this](UniqueFd fd) { serve(std::move(fd)); }) {}
  [[nodiscard]] uint16_t port() const { return server_.port(); }
  [[nodiscard]] std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port()) + path;
  }
  int requests() {
    std::lock_guard lock(mu_);
    return int(bodies_.size());
  }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::vector<std::string> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }

  static std::string chat_stream(bool with_usage) {
    auto chunk = [](const std::string& data) {
      const std::string event = "data: " + data + "\n\n";
      char size[16];
      std::snprintf(size, sizeof size, "%zx", event.size());
      return std::string(size) + "\r\n" + event + "\r\n";
    };
    std::string out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    out += chunk(
        R"({"id":"c1","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"content":"Hel"}}]})");
    out += chunk(
        R"({"id":"c1","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]})");
    if (with_usage)
      out += chunk(
          R"({"id":"c1","object":"chat.completion.chunk","model":"gpt-test","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14}})");
    out += chunk("[DONE]");
    return out + "0\r\n\r\n";
  }

 private:
  void serve(UniqueFd fd) {
    std::string got;
    char b[65536];
    size_t want = std::string::npos;
    for (;;) {
      if (want == std::string::npos) {
        const size_t end = got.find("\r\n\r\n");
        if (end != std::string::npos) {
          std::string head = got.substr(0, end);
          for (char& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
          const size_t cl = head.find("content-length: ");
          want = end + 4 + (cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16)));
        }
      }
      if (want != std::string::npos && got.size() >= want) break;
      ssize_t n = ::recv(fd.get(), b, sizeof b, 0);
      if (n <= 0) return;
      got.append(b, size_t(n));
    }
    const std::string head = got.substr(0, got.find("\r\n\r\n"));
    const std::string body = got.substr(got.find("\r\n\r\n") + 4);
    {
      std::lock_guard lock(mu_);
      heads_.push_back(head);
      bodies_.push_back(body);
    }
    std::this_thread::sleep_for(delay_);
    auto j = nlohmann::json::parse(body, nullptr, false);
    const std::string model = j.is_object() && j.contains("model") ? j["model"].get<std::string>() : "unknown";
    if (head.find("/v1/chat/completions") != std::string::npos && j.is_object() && j.value("stream", false)) {
      const bool usage = j.contains("stream_options") && j["stream_options"].value("include_usage", false);
      fltest::send_all(fd.get(), chat_stream(usage));
      return;
    }
    if (head.find("/v1/messages") != std::string::npos && j.is_object() && j.value("stream", false)) {
      send_messages_stream(fd.get(), model);
      return;
    }
    nlohmann::json answer;
    if (head.find("/v1/chat/completions") != std::string::npos)
      answer = {{"id", "c1"},
                {"object", "chat.completion"},
                {"model", model},
                {"choices",
                 {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "hi"}}}, {"finish_reason", "stop"}}}},
                {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 3}, {"total_tokens", 15}}}};
    else
      answer = {{"id", "msg_1"},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model},
                {"content", {{{"type", "text"}, {"text", "hi"}}}},
                {"stop_reason", "end_turn"},
                {"usage", {{"input_tokens", 10}, {"output_tokens", 5}}}};
    const std::string text = answer.dump();
    fltest::send_all(fd.get(), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                                   std::to_string(text.size()) + "\r\nConnection: close\r\n\r\n" + text);
  }

  static void send_messages_stream(int fd, const std::string& model) {
    fltest::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
    auto event = [&](const std::string& type, const nlohmann::json& data) {
      const std::string e = "event: " + type + "\ndata: " + data.dump() + "\n\n";
      char size[16];
      std::snprintf(size, sizeof size, "%zx", e.size());
      fltest::send_all(fd, std::string(size) + "\r\n" + e + "\r\n");
      std::this_thread::sleep_for(100ms);
    };
    event("message_start", {{"type", "message_start"},
                            {"message",
                             {{"id", "msg_s1"},
                              {"type", "message"},
                              {"role", "assistant"},
                              {"model", model},
                              {"content", nlohmann::json::array()},
                              {"stop_reason", nullptr},
                              {"usage", {{"input_tokens", 10}, {"output_tokens", 1}}}}}});
    event("content_block_start",
          {{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}});
    for (const char* piece : {"Hello", " there"})
      event("content_block_delta",
            {{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", piece}}}});
    event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
    event("message_delta",
          {{"type", "message_delta"}, {"delta", {{"stop_reason", "end_turn"}}}, {"usage", {{"output_tokens", 2}}}});
    event("message_stop", {{"type", "message_stop"}});
    fltest::send_all(fd, "0\r\n\r\n");
  }

  std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::vector<std::string> heads_;
  std::vector<std::string> bodies_;
  fltest::ScriptServer server_;
};

// curl POSTing JSON through the guard's proxy (the variables it sets).
std::vector<std::string> curl_post(const std::string& url, const std::string& body) {
  return {"curl",          "-sS", "--max-time", "20", "-w", "[%{http_code}]", "-H", "content-type: application/json",
          "--data-binary", body,  url};
}

std::vector<nlohmann::json> activity_lines(const std::string& file) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST_F(GuardWireTest, DeniedModelRaisesTheSdksPermissionErrorOnceAndNothingGoesUpstream) {
  const std::string sdk_dir = LLM_SDK_DIR;
  if (::access((sdk_dir + "/node_modules/@anthropic-ai/sdk").c_str(), R_OK) != 0)
    GTEST_SKIP() << "*** SKIPPED: " << sdk_dir << "/node_modules missing: run scripts/install-deps.sh ***";
  LlmStandIn standin;
  auto r = guard({"--enforce", "--terminate-tls", "--deny-model", "claude-test", "--deny-model", "gpt-*"},
                 {"node", sdk_dir + "/guard_sdk_test.js", "http://127.0.0.1:" + std::to_string(standin.port())});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("ok anthropic: PermissionDeniedError"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok anthropic: exactly one attempt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok openai: exactly one attempt"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("deny (rule --deny-model claude-test: model claude-test is denied) model claude-test"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(standin.requests(), 0);
}

TEST_F(GuardWireTest, MaxTokensDeniesACallAskingForMoreAndLetsTheRestThrough) {
  LlmStandIn standin;
  auto r = guard({"--enforce", "--terminate-tls", "--max-tokens", "1000"},
                 {"sh", "-c",
                  "curl -sS --max-time 20 -w '[%{http_code}]\\n' --data-binary "
                  "'{\"model\":\"claude-test\",\"max_tokens\":5000,\"messages\":[]}' " +
                      standin.url("/v1/messages") +
                      "; curl -sS --max-time 20 -w '[%{http_code}]\\n' --data-binary "
                      "'{\"messages\":[],\"max_tokens\":100,\"model\":\"claude-test\"}' " +
                      standin.url("/v1/messages")});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("permission_error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("asks for more than 1000 output tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[403]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[200]"), std::string::npos) << r.out;
  EXPECT_EQ(standin.requests(), 1);
}

TEST_F(GuardWireTest, UnparseableBodyOnAnLlmPathIsDeniedByAnLlmRuleWithTheReason) {
  LlmStandIn standin;
  auto r = guard({"--enforce", "--terminate-tls", "--deny-model", "claude-opus-*"},
                 curl_post(standin.url("/v1/messages"), "this is not json"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("[403]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("llm facts unknown: body is not JSON"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("llm facts unknown"), std::string::npos) << r.err;
  EXPECT_EQ(standin.requests(), 0);
}

TEST_F(GuardWireTest, RouteModelRewritesWhatTheStandInSeesAndTheActivitySaysSo) {
  LlmStandIn standin;
  const std::string log = dir_.file("route.jsonl");
  auto r = guard(
      {"--terminate-tls", "--route-model", "claude-big=claude-small", "--json-log", log},
      curl_post(
          standin.url("/v1/messages"),
          R"({"messages":[{"role":"user","content":"the model is claude-big"}],"model":"claude-big","max_tokens":64})"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("[200]"), std::string::npos) << r.out;
  ASSERT_EQ(standin.requests(), 1);
  const auto sent = nlohmann::json::parse(standin.bodies()[0]);
  EXPECT_EQ(sent["model"], "claude-small");
  EXPECT_EQ(sent["messages"][0]["content"], "the model is claude-big");  // only the top-level model
  EXPECT_NE(standin.heads()[0].find("Accept-Encoding: identity"), std::string::npos) << standin.heads()[0];
  EXPECT_NE(r.err.find("route-model claude-big -> claude-small"), std::string::npos) << r.err;
  bool routed = false;
  for (const auto& e : activity_lines(log))
    if (e["kind"] == "route" && e["llm"]["model"] == "claude-small") routed = true;
  EXPECT_TRUE(routed);
}

TEST_F(GuardWireTest, UsageIsPrintedAndLoggedPerCallAndTheLogVerifies) {
  LlmStandIn standin;
  const std::string log = dir_.file("usage.jsonl");
  auto r = guard({"--terminate-tls", "--json-log", log},
                 curl_post(standin.url("/v1/messages"), R"({"model":"claude-test","max_tokens":64,"messages":[]})"));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("llm: claude-test in=10 out=5"), std::string::npos) << r.err;
  bool usage = false;
  for (const auto& e : activity_lines(log))
    if (e["kind"] == "llm" && e["llm"]["model"] == "claude-test" && e["llm"]["in"] == 10 && e["llm"]["out"] == 5)
      usage = true;
  EXPECT_TRUE(usage);
  auto v = faultctl({"activity", "verify", log});
  EXPECT_TRUE(v.status.is(0)) << v.describe();
}

TEST_F(GuardWireTest, ChatStreamGetsIncludeUsageAndTheClientSeesTheStreamItWouldHaveSeen) {
  LlmStandIn standin;
  const std::string log = dir_.file("stream.jsonl");
  const std::string body = R"({"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]})";
  const std::vector<std::string> client = {"curl", "-sS",           "-N", "--max-time",
                                           "20",   "--data-binary", body, standin.url("/v1/chat/completions")};
  auto direct = fltest::run_command(client, {.env = env_}, 30s);
  ASSERT_TRUE(direct.status.is(0)) << direct.describe();
  auto r = guard({"--terminate-tls", "--json-log", log}, client);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, direct.out);  // byte for byte: the usage chunk the guard asked for is removed
  EXPECT_EQ(r.out.find("usage"), std::string::npos) << r.out;
  ASSERT_EQ(standin.requests(), 2);
  EXPECT_NE(standin.bodies()[1].find(R"("stream_options":{"include_usage":true})"), std::string::npos)
      << standin.bodies()[1];
  EXPECT_NE(r.err.find("llm: gpt-test in=12 out=2"), std::string::npos) << r.err;
  bool usage = false;
  for (const auto& e : activity_lines(log))
    if (e["kind"] == "llm" && e["llm"]["in"] == 12 && e["llm"]["out"] == 2) usage = true;
  EXPECT_TRUE(usage);
}

TEST_F(GuardWireTest, BudgetForTenAdmitsExactlyTenOfTwentyConcurrentCallsAndARestartKeepsTheCharge) {
  // Every call in flight at once (the stand-in answers after 1.5 s), so
  // admission alone decides: reserve-then-settle cannot overshoot.
  LlmStandIn standin(1500ms);
  const std::string call =
      "curl -sS -o /dev/null --max-time 30 -w '%{http_code}\\n' --data-binary "
      "'{\"model\":\"claude-test\",\"max_tokens\":100,\"messages\":[]}' " +
      standin.url("/v1/messages");
  const std::vector<std::string> flags = {
      "--enforce", "--terminate-tls", "--llm-token-budget", "1000", "--llm-request-budget", "10", "--llm-budget-window",
      "1d"};
  fltest::wait_clear_of_window_edge(std::chrono::hours(24));  // this run and the restart in one window
  auto r = guard(flags, {"sh", "-c", "for i in $(seq 20); do " + call + " & done; wait"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  auto count = [](const std::string& out, const std::string& code) {
    size_t n = 0;
    for (size_t at = out.find(code); at != std::string::npos; at = out.find(code, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(r.out, "200"), 10u) << r.out;
  EXPECT_EQ(count(r.out, "429"), 10u) << r.out;
  EXPECT_EQ(standin.requests(), 10);
  // The budget's denial: the provider's own, not to be retried.
  auto denial = guard(flags, curl_post(standin.url("/v1/messages"), R"({"model":"claude-test","max_tokens":100})"));
  ASSERT_TRUE(denial.status.is(0)) << denial.describe();
  EXPECT_NE(denial.out.find("[429]"), std::string::npos) << denial.out;
  EXPECT_NE(denial.out.find("rate_limit_error"), std::string::npos) << denial.out;
  EXPECT_NE(denial.err.find("used 50 tokens, 10 calls"), std::string::npos) << denial.err;  // settled to out=5 each
  EXPECT_EQ(standin.requests(), 10);
}

// --- --replay -------------------------------------------------------------------

TEST_F(GuardWireTest, ReplayRecordsThenAnswersTheSdkFromTheRecordingByteForByte) {
  const std::string sdk_dir = LLM_SDK_DIR;
  if (::access((sdk_dir + "/node_modules/@anthropic-ai/sdk").c_str(), R_OK) != 0)
    GTEST_SKIP() << "*** SKIPPED: " << sdk_dir << "/node_modules missing: run scripts/install-deps.sh ***";
  LlmStandIn standin;
  const std::string dir = dir_.file("replay");
  const std::string log = dir_.file("replay.jsonl");
  auto run = [&](const std::string& out) {
    return guard({"--terminate-tls", "--replay", dir, "--json-log", log},
                 {"node", sdk_dir + "/guard_replay_sdk_test.js", standin.url(""), out});
  };
  auto first = run(dir_.file("first.json"));
  ASSERT_TRUE(first.status.is(0)) << first.describe();
  EXPECT_EQ(standin.requests(), 2);  // the JSON call and the stream, each once
  EXPECT_NE(first.out.find("text json: hi\n"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("text stream: Hello there\n"), std::string::npos) << first.out;
  EXPECT_NE(first.err.find("recorded " + dir + "/"), std::string::npos) << first.err;
  EXPECT_EQ(first.err.find("replayed "), std::string::npos) << first.err;

  auto second = run(dir_.file("second.json"));
  ASSERT_TRUE(second.status.is(0)) << second.describe();
  EXPECT_EQ(standin.requests(), 2);  // nothing more reached the stand-in
  EXPECT_EQ(second.out, first.out);  // the SDK parsed the same text from the replay
  EXPECT_NE(second.err.find("replayed " + dir + "/"), std::string::npos) << second.err;
  EXPECT_EQ(second.err.find("recorded "), std::string::npos) << second.err;

  auto read = [](const std::string& f) {
    std::ifstream in(f);
    return nlohmann::json::parse(in, nullptr, false);
  };
  const auto a = read(dir_.file("first.json")), b = read(dir_.file("second.json"));
  ASSERT_TRUE(a.is_array() && a.size() == 2) << a;
  EXPECT_EQ(a, b);  // status, content type and body bytes, both calls
  EXPECT_EQ(a[1]["type"], "text/event-stream");

  // The recordings: one file per call, the stream's pieces with their arrival times.
  int files = 0;
  bool timed = false;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++files;
    const auto rec = read(e.path().string());
    ASSERT_TRUE(rec.is_object()) << e.path();
    EXPECT_EQ(rec["key"].get<std::string>() + ".json", e.path().filename().string());
    if (rec["chunks"].size() > 3 && rec["chunks"].back()["at_ms"].get<uint64_t>() >= 500) timed = true;
  }
  EXPECT_EQ(files, 2);
  EXPECT_TRUE(timed) << "the stream's recording keeps its pieces' arrival times";
  int recorded = 0, replayed = 0;
  for (const auto& e : activity_lines(log)) {
    recorded += e["kind"] == "recorded";
    replayed += e["kind"] == "replayed";
  }
  EXPECT_EQ(recorded, 2);
  EXPECT_EQ(replayed, 2);
  auto v = faultctl({"activity", "verify", log});
  EXPECT_TRUE(v.status.is(0)) << v.describe();
}

TEST_F(GuardWireTest, ReplayGivesCurlTheRecordedBytesExactlyAndKeysOnTheNormalisedBody) {
  LlmStandIn standin;
  const std::string dir = dir_.file("replay");
  auto call = [&](const std::string& body) {
    return guard({"--terminate-tls", "--replay", dir}, {"curl", "-sS", "-i", "--raw", "-N", "--max-time", "20",
                                                        "--data-binary", body, standin.url("/v1/messages")});
  };
  auto first = call(R"({"model":"claude-test","max_tokens":16,"stream":true,"messages":[]})");
  ASSERT_TRUE(first.status.is(0)) << first.describe();
  // The same request with its keys in another order and spaces: the same key.
  auto second = call(R"({ "messages": [], "stream": true, "max_tokens": 16, "model": "claude-test" })");
  ASSERT_TRUE(second.status.is(0)) << second.describe();
  EXPECT_EQ(standin.requests(), 1);
  EXPECT_EQ(second.out, first.out);  // head, chunk framing and events, byte for byte
  EXPECT_NE(first.out.find("Transfer-Encoding: chunked"), std::string::npos) << first.out;
  // Another body is another key: forwarded and recorded.
  auto third = call(R"({"model":"claude-test","max_tokens":17,"stream":true,"messages":[]})");
  ASSERT_TRUE(third.status.is(0)) << third.describe();
  EXPECT_EQ(standin.requests(), 2);
}

// --- --cache (exact, in memory) ---------------------------------------------------

TEST_F(GuardWireTest, ReplayKeepsARecordedStreamsTiming) {
  // The stand-in's Anthropic stream: 7 events, 100 ms apart. A client that
  // prints, per event, its arrival in ms after the first.
  LlmStandIn standin;
  const std::string dir = dir_.file("paced");
  const std::string client =
      "import json, sys, time, urllib.request\n"
      "body = json.dumps({'model': 'claude-test', 'max_tokens': 16, 'stream': True,\n"
      "                   'messages': [{'role': 'user', 'content': 'stream hi'}]}).encode()\n"
      "req = urllib.request.Request(sys.argv[1], data=body, headers={'content-type': 'application/json'})\n"
      "t0 = None\n"
      "with urllib.request.urlopen(req, timeout=20) as r:\n"
      "    for line in r:\n"
      "        if line.startswith(b'event:'):\n"
      "            now = time.monotonic()\n"
      "            t0 = now if t0 is None else t0\n"
      "            print(int((now - t0) * 1000), flush=True)\n";
  const std::vector<std::string> cmd = {"python3", "-c", client, standin.url("/v1/messages")};
  auto spans = [](const std::string& out) {
    std::vector<int> at;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);) at.push_back(std::stoi(l));
    return at;
  };
  auto first = guard({"--terminate-tls", "--replay", dir}, cmd);
  ASSERT_TRUE(first.status.is(0)) << first.describe();
  ASSERT_EQ(spans(first.out).size(), 7u) << first.out;
  EXPECT_EQ(standin.requests(), 1);
  auto second = guard({"--terminate-tls", "--replay", dir}, cmd);
  ASSERT_TRUE(second.status.is(0)) << second.describe();
  EXPECT_EQ(standin.requests(), 1) << "the second call was not replayed";
  EXPECT_NE(second.err.find("-> replayed "), std::string::npos) << second.err;
  const auto replayed = spans(second.out);
  ASSERT_EQ(replayed.size(), 7u) << second.out;
  // The recording's own span, first piece to last, from its file.
  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") file = e.path().string();
  std::ifstream in(file);
  const auto rec = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(rec.is_object() && rec["chunks"].size() > 1) << file;
  const int recorded = rec["chunks"].back()["at_ms"].get<int>() - rec["chunks"].front()["at_ms"].get<int>();
  EXPECT_GE(recorded, 500) << "the stand-in's 600 ms of events were recorded within " << recorded << " ms";
  // The replay keeps the gaps (loosely: a loaded machine adds, never removes,
  // time): its events span at least 60% of the recording, and not much more.
  const int span = replayed.back() - replayed.front();
  std::printf("replay timing: recorded %d ms (first piece to last), events replayed %d ms apart (first to last)\n",
              recorded, span);
  EXPECT_GE(span, recorded * 6 / 10) << second.out;
  EXPECT_LE(span, recorded + 2000) << second.out;
  for (size_t i = 1; i < replayed.size(); ++i)
    EXPECT_GE(replayed[i] - replayed[i - 1], 30) << "two events replayed at once:\n" << second.out;
}

TEST_F(GuardWireTest, CacheAnswersTheSdksRepeatedCallsFromMemoryWithinOneGuard) {
  const std::string sdk_dir = LLM_SDK_DIR;
  if (::access((sdk_dir + "/node_modules/@anthropic-ai/sdk").c_str(), R_OK) != 0)
    GTEST_SKIP() << "*** SKIPPED: " << sdk_dir << "/node_modules missing: run scripts/install-deps.sh ***";
  LlmStandIn standin;
  const std::string log = dir_.file("cache.jsonl");
  const std::string script = "node " + sdk_dir + "/guard_replay_sdk_test.js " + standin.url("") + " ";
  auto r = guard({"--terminate-tls", "--cache", "--json-log", log},
                 {"sh", "-c", script + dir_.file("a.json") + " && " + script + dir_.file("b.json")});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(standin.requests(), 2);  // the JSON call and the stream, once each
  EXPECT_EQ(r.out, "text json: hi\ntext stream: Hello there\ntext json: hi\ntext stream: Hello there\n") << r.out;
  auto read = [](const std::string& f) {
    std::ifstream in(f);
    return nlohmann::json::parse(in, nullptr, false);
  };
  const auto a = read(dir_.file("a.json"));
  ASSERT_TRUE(a.is_array() && a.size() == 2) << a;
  EXPECT_EQ(a, read(dir_.file("b.json")));
  int cached = 0, hits = 0;
  for (const auto& e : activity_lines(log)) {
    cached += e["kind"] == "cached";
    hits += e["kind"] == "cache-hit";
  }
  EXPECT_EQ(cached, 2);
  EXPECT_EQ(hits, 2);
  EXPECT_NE(r.err.find("-> cache hit the cache ("), std::string::npos) << r.err;
}

TEST_F(GuardWireTest, CacheTtlEndsAnAnswersLifeAndTheFlagsAreChecked) {
  LlmStandIn standin;
  const std::string post =
      "curl -sS --max-time 20 -w '[%{http_code}]\\n' --data-binary "
      "'{\"model\":\"claude-test\",\"max_tokens\":16,\"messages\":[]}' " +
      standin.url("/v1/messages");
  auto r = guard({"--terminate-tls", "--cache", "--cache-ttl", "1500ms"},
                 {"sh", "-c", post + "; " + post + "; sleep 2; " + post});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(standin.requests(), 2);  // the second from memory, the third after the TTL
  const std::string one = r.out.substr(0, r.out.find('\n') + 1);
  EXPECT_EQ(r.out, one + one + one);

  auto both = guard({"--cache", "--replay", dir_.file("r")}, {"true"});
  EXPECT_TRUE(both.status.is(2)) << both.describe();
  EXPECT_NE(both.err.find("--cache and --replay are exclusive"), std::string::npos) << both.err;
  auto fuzzy = guard({"--cache", "--cache-mode", "fuzzy"}, {"true"});
  EXPECT_TRUE(fuzzy.status.is(2)) << fuzzy.describe();
  EXPECT_NE(fuzzy.err.find("--cache-mode 'fuzzy': exact or similar"), std::string::npos) << fuzzy.err;
  for (const char* bad : {"0", "1.5", "x", "0.9x"}) {
    auto t = guard({"--cache", "--cache-mode", "similar", "--cache-threshold", bad}, {"true"});
    EXPECT_TRUE(t.status.is(2)) << t.describe();
    EXPECT_NE(t.err.find("--cache-threshold '" + std::string(bad) + "'"), std::string::npos) << t.err;
  }
  auto exact = guard({"--cache", "--cache-threshold", "0.9"}, {"true"});
  EXPECT_TRUE(exact.status.is(2)) << exact.describe();
  EXPECT_NE(exact.err.find("--cache-threshold applies to --cache-mode similar"), std::string::npos) << exact.err;
  auto ttl = guard({"--cache-ttl", "1m"}, {"true"});
  EXPECT_TRUE(ttl.status.is(2)) << ttl.describe();
}

TEST_F(GuardWireTest, SimilarCacheAnswersASimilarPromptAndForwardsADifferentOne) {
  const std::string sdk_dir = LLM_SDK_DIR;
  if (::access((sdk_dir + "/node_modules/@anthropic-ai/sdk").c_str(), R_OK) != 0)
    GTEST_SKIP() << "*** SKIPPED: " << sdk_dir << "/node_modules missing: run scripts/install-deps.sh ***";
  LlmStandIn standin;
  const std::string log = dir_.file("similar.jsonl");
  const std::string first = "Summarise the release notes of version 2.4 of the billing service in three bullet points.";
  const std::vector<std::string> calls = {
      "64:" + first,
      // Case, punctuation and one more word: similar (0.95 or so), answered from the cache.
      "64:Please summarise the release notes of version 2.4 of the billing service, in three bullet points!",
      // Another request: forwarded.
      "64:Write a haiku about the sea at night.",
      // The first prompt with another max_tokens: another scope, forwarded.
      "128:" + first,
  };
  std::vector<std::string> cmd = {"node", sdk_dir + "/guard_similar_sdk_test.js", standin.url("")};
  cmd.insert(cmd.end(), calls.begin(), calls.end());
  auto r = guard(
      {"--terminate-tls", "--cache", "--cache-mode", "similar", "--cache-threshold", "0.92", "--json-log", log}, cmd);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(standin.requests(), 3) << r.err;  // the first, the haiku and the one with 128 max tokens
  const auto bodies = standin.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_NE(bodies[1].find("haiku"), std::string::npos) << bodies[1];
  EXPECT_NE(bodies[2].find("\"max_tokens\":128"), std::string::npos) << bodies[2];
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4) << r.out;
  EXPECT_NE(r.out.find("in three bullet points! -> hi"), std::string::npos) << r.out;
  int hits = 0;
  for (const auto& e : activity_lines(log)) hits += e["kind"] == "cache-hit";
  EXPECT_EQ(hits, 1);
  EXPECT_NE(r.err.find("-> cache hit the cache ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(") (similar 0.9"), std::string::npos) << r.err;
}

// --optimize-cache with the Anthropic SDK: the same tools listed in two
// orders reach the stand-in in one order (by name), with a breakpoint on the
// last tool and on the system prompt's end, every text as the SDK sent it;
// monitor only says what it would change.
TEST_F(GuardWireTest, OptimizeCacheOrdersToolsAndPlacesBreakpointsForTheSdkAndMonitorOnlyLogs) {
  const std::string sdk_dir = LLM_SDK_DIR;
  if (::access((sdk_dir + "/node_modules/@anthropic-ai/sdk").c_str(), R_OK) != 0)
    GTEST_SKIP() << "*** SKIPPED: " << sdk_dir << "/node_modules missing: run scripts/install-deps.sh ***";
  const std::vector<std::string> cmd = {"node", sdk_dir + "/guard_cache_optimizer_sdk_test.js"};
  const std::string system = "You are a careful coding agent.\nFollow the repository's style.";
  {
    LlmStandIn standin;
    auto argv = cmd;
    argv.push_back(standin.url(""));
    auto r = guard({"--terminate-tls", "--optimize-cache", "enforce"}, argv);
    ASSERT_TRUE(r.status.is(0)) << r.describe();
    EXPECT_NE(r.out.find("write_file,read_file,grep -> hi"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("grep,write_file,read_file -> hi"), std::string::npos) << r.out;
    const auto bodies = standin.bodies();
    ASSERT_EQ(bodies.size(), 2u);
    const auto a = nlohmann::json::parse(bodies[0]);
    const auto b = nlohmann::json::parse(bodies[1]);
    ASSERT_TRUE(a["tools"].is_array()) << bodies[0];
    std::vector<std::string> names;
    for (const auto& t : a["tools"]) names.push_back(t["name"]);
    EXPECT_EQ(names, (std::vector<std::string>{"grep", "read_file", "write_file"}));
    EXPECT_EQ(a["tools"], b["tools"]) << "the same tools in another order are the same prefix";
    EXPECT_EQ(a["tools"][2]["cache_control"], (nlohmann::json{{"type", "ephemeral"}}));
    EXPECT_FALSE(a["tools"][0].contains("cache_control"));
    EXPECT_EQ(a["tools"][2]["description"], "Write a file. Ünïcödé and \"quotes\" stay as they are.");
    ASSERT_TRUE(a["system"].is_array()) << bodies[0];
    ASSERT_EQ(a["system"].size(), 1u);
    EXPECT_EQ(a["system"][0]["type"], "text");
    EXPECT_EQ(a["system"][0]["text"], system);
    EXPECT_EQ(a["system"][0]["cache_control"], (nlohmann::json{{"type", "ephemeral"}}));
    EXPECT_EQ(a["messages"], (nlohmann::json::parse(R"([{"role":"user","content":"list the files"}])")));
    EXPECT_EQ(a["model"], "claude-test");
    EXPECT_EQ(a["max_tokens"], 64);
    EXPECT_EQ(a["temperature"], 0.7);
    EXPECT_EQ(bodies[0].find("\"model\":\"claude-test\""), 1u) << "the members keep their order: " << bodies[0];
    EXPECT_NE(r.err.find("optimize-cache: tools ordered by name; cache_control on the last tool (write_file); "
                         "cache_control on the system prompt's end"),
              std::string::npos)
        << r.err;
  }
  {
    LlmStandIn standin;
    auto argv = cmd;
    argv.push_back(standin.url(""));
    auto r = guard({"--terminate-tls", "--optimize-cache", "monitor"}, argv);
    ASSERT_TRUE(r.status.is(0)) << r.describe();
    const auto bodies = standin.bodies();
    ASSERT_EQ(bodies.size(), 2u);
    const auto a = nlohmann::json::parse(bodies[0]);
    EXPECT_EQ(a["tools"][0]["name"], "write_file") << "monitor sends the body as it came";
    EXPECT_EQ(a["system"], system);
    EXPECT_EQ(bodies[0].find("cache_control"), std::string::npos) << bodies[0];
    EXPECT_NE(r.err.find("optimize-cache would: tools ordered by name"), std::string::npos) << r.err;
  }
}

TEST_F(GuardWireTest, OptimizeCacheModeIsCheckedAtStart) {
  auto r = guard({"--optimize-cache", "always"}, {"true"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--optimize-cache 'always': off, monitor or enforce"), std::string::npos) << r.err;
}

// The guard's CA reaches git through the variables the guard sets: `git
// ls-remote` (Debian's git, libcurl) through a terminating guard to a loopback
// HTTPS git server (git http-backend behind python's https server, its
// certificate from another CA the guard is given with --upstream-ca). The
// same git with the guard's CA variables removed refuses the guard's leaf, and
// a path rule on the terminated HTTPS denies its upload-pack call.
TEST_F(GuardWireTest, GitLsRemoteTrustsTheGuardsCaThroughTerminatedHttps) {
  const std::string root = dir_.file("git");
  auto sh = [](const std::string& cmd) { return fltest::run_command({"sh", "-c", cmd}, {}, 30s); };
  auto made = sh("set -e; mkdir -p " + root + "; cd " + root + "; git init -q -b main work; cd work; " +
                 "git -c user.email=t@example.com -c user.name=t commit -q --allow-empty -m one; cd ..; " +
                 "git clone -q --bare work repo.git; git -C repo.git rev-parse refs/heads/main");
  ASSERT_TRUE(made.status.is(0)) << made.describe();
  const std::string commit = made.out.substr(0, 40);
  auto upstream_ca = faultline::CertificateAuthority::generate();
  ASSERT_TRUE(upstream_ca.ok());
  auto leaf = upstream_ca->mint_leaf("127.0.0.1");
  ASSERT_TRUE(leaf.ok());
  fltest::write_file(dir_.file("upstream-ca.pem"), upstream_ca->cert_pem());
  fltest::write_file(dir_.file("git.pem"), (*leaf)->cert_pem());
  fltest::write_file(dir_.file("git.key"), fltest::private_key_pem((*leaf)->key()));
  ASSERT_EQ(::chmod(dir_.file("upstream-ca.pem").c_str(), 0644), 0);
  auto server = ChildProcess::spawn({"python3", std::string(GUARD_TEST_DIR) + "/git_https_standin.py",
                                     dir_.file("git.pem"), dir_.file("git.key"), root});
  auto port = server.wait_line_starting("PORT ", 10s);
  ASSERT_TRUE(port) << server.describe();
  const std::string url = "https://127.0.0.1:" + port->substr(5) + "/git/repo.git";
  const std::string log = dir_.file("git.jsonl");

  auto r = guard({"--enforce", "--terminate-tls", "--upstream-ca", dir_.file("upstream-ca.pem"), "--json-log", log},
                 {"sh", "-c",
                  "git ls-remote " + url +
                      " && echo ok-with-ca; "
                      "env -u GIT_SSL_CAINFO -u SSL_CERT_FILE -u CURL_CA_BUNDLE git ls-remote " +
                      url + " || echo refused-without-ca"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find(commit + "\trefs/heads/main"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("ok-with-ca"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("refused-without-ca"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("GIT_SSL_CAINFO"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("server certificate verification failed"), std::string::npos)
      << "git without the variables: " << r.err;
  bool refs = false, upload = false;
  for (const auto& e : activity_lines(log)) {
    refs |= e["method"] == "GET" && e["path"] == "/git/repo.git/info/refs?service=git-upload-pack";
    upload |= e["method"] == "POST" && e["path"] == "/git/repo.git/git-upload-pack" && e["verdict"] == "allow";
  }
  EXPECT_TRUE(refs && upload) << "the inner requests were judged by path";

  r = guard({"--enforce", "--terminate-tls", "--upstream-ca", dir_.file("upstream-ca.pem"), "--deny",
             "POST /git/repo.git/git-upload-pack"},
            {"git", "ls-remote", url});
  EXPECT_FALSE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("403"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find(commit), std::string::npos) << r.out;
}

}  // namespace
