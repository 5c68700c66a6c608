// faultd's guard gateway (--guard-gateway): faultd on one end of a veth pair
// in a test namespace, agents' curl in the other. Allowed requests reach an
// upstream, a denied one is 403 JSON, no token or a wrong one is 407, the CA
// is served without a token, a held request is approved with `faultctl
// approvals` (faultd's approvals socket is found as a guard's), and a SIGHUP
// restart keeps the gateway's listener with the policy file read anew. Bad
// flags exit 2 naming the flag.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/files.h"
#include "faultd_env.h"
#include "selftests/lib/echo_upstream.h"
#include "selftests/lib/netns_pair.h"

namespace fldaemon {
namespace {

void gw_write_text(const std::string& file, const std::string& text, mode_t mode) {
  std::ofstream(file, std::ios::trunc) << text;
  ASSERT_EQ(::chmod(file.c_str(), mode), 0) << file;
}

bool gw_alive(pid_t pid) { return ::kill(pid, 0) == 0; }

// The proxy variables of the test's own environment never reach curl.
const std::vector<std::string> kGwNoProxyEnv = {
    "HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=", "NO_PROXY=", "no_proxy="};

// The gateway's guard keeps its approvals socket in $XDG_RUNTIME_DIR/faultline
// and its CA in FAULTLINE_CA_DIR: both the test's own, for faultd and for the
// faultctl that approves.
class FaultdGatewayTest : public FaultdTest {
 protected:
  void SetUp() override {
    FaultdTest::SetUp();
    if (dir().empty()) return;
    runtime_ = dir() + "/rt";
    ASSERT_EQ(::mkdir(runtime_.c_str(), 0700), 0);
    save("XDG_RUNTIME_DIR", runtime_);
    save("FAULTLINE_CA_DIR", dir() + "/ca");
  }
  void TearDown() override {
    FaultdTest::TearDown();
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  void save(const std::string& name, const std::string& value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  std::vector<std::string> faultctl_env() const {
    std::vector<std::string> e = env();
    e.push_back("XDG_RUNTIME_DIR=" + runtime_);
    return e;
  }
  std::string runtime_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(FaultdGatewayTest, GatewayServesAgentsOfAnotherNamespaceAndSurvivesSighup) {
  const std::string prefix = "flfg" + std::to_string(::getpid() % 100000);
  fltest::NetnsPair pair(prefix, {prefix + "h", {"198.18.78.1/24"}}, {prefix + "c", {"198.18.78.2/24"}},
                         {.ipv6 = false});
  // The upstream, on the gateway's side (its loopback).
  auto upstream = fltest::spawn_echo_upstream(pair.a());
  const auto address = fltest::echo_upstream_address(upstream);
  ASSERT_TRUE(address) << upstream.describe();
  const std::string up = *address;
  const std::string pol = dir() + "/guard.json";
  gw_write_text(pol,
                R"({"mode":"enforce","default_allow":false,"rules":[)"
                R"({"name":"up","action":"allow","host":")" +
                    up +
                    R"("},)"
                    R"({"name":"hold","action":"approve","host":")" +
                    up + R"(","path":"/hold"}]})",
                0644);
  const std::string tokens = dir() + "/tokens.txt";
  gw_write_text(tokens, "# agents\nalice=alice-token-1\n\nci=ci-token-22\n", 0600);
  const std::string log = dir() + "/activity.jsonl";
  start_faultd_in(pair.a(), {"--guard-gateway", "198.18.78.1:3128", "--guard-tokens", tokens, "--guard-policy", pol,
                             "--guard-terminate-tls", "--guard-json-log", log, "--restart-drain", "10s"});
  ASSERT_NE(faultd().err().find("guard gateway on 198.18.78.1:3128"), std::string::npos) << faultd().describe();

  auto agent_argv = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"ip",  "netns",      "exec", pair.b(), "curl",
                                     "-sS", "--max-time", "30",   "-w",     "[%{http_code}]"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  auto agent_curl = [&](std::vector<std::string> args) {
    return fltest::run_command(agent_argv(std::move(args)), {.env = kGwNoProxyEnv}, 40s);
  };
  auto code_of = [](const CommandResult& r) {
    const size_t at = r.out.rfind('[');
    return at == std::string::npos ? r.out : r.out.substr(at);
  };
  const std::string gw = "http://198.18.78.1:3128";
  auto allowed = agent_curl({"-x", gw, "--proxy-user", "alice:alice-token-1", "http://" + up + "/ok"});
  EXPECT_EQ(allowed.out, "upstream saw /ok[200]") << allowed.describe();
  auto denied = agent_curl(
      {"-x", gw, "--proxy-header", "Proxy-Authorization: Bearer ci-token-22", "http://127.0.0.1:1/nothing-there"});
  ASSERT_EQ(code_of(denied), "[403]") << denied.describe();
  {
    auto j = nlohmann::json::parse(denied.out.substr(0, denied.out.rfind('[')), nullptr, false);
    ASSERT_TRUE(j.is_object()) << denied.out;
    for (const char* k : {"error", "rule", "reason", "request_id"}) EXPECT_TRUE(j.contains(k)) << k << ": " << j;
  }
  auto wrong = agent_curl({"-x", gw, "--proxy-user", "alice:not-the-token", "http://" + up + "/ok"});
  EXPECT_EQ(code_of(wrong), "[407]") << wrong.describe();
  auto none = agent_curl({"-x", gw, "http://" + up + "/ok"});
  EXPECT_EQ(code_of(none), "[407]") << none.describe();
  auto ca = agent_curl({gw + "/__faultline/ca.crt"});
  EXPECT_NE(ca.out.find("-----BEGIN CERTIFICATE-----"), std::string::npos) << ca.describe();
  EXPECT_EQ(code_of(ca), "[200]") << ca.describe();

  // Held, then approved with faultctl approvals (faultd's socket, found by
  // the same scan as any guard's).
  auto held = ChildProcess::spawn(agent_argv({"-x", gw, "--proxy-user", "ci:ci-token-22", "http://" + up + "/hold"}),
                                  {.env = kGwNoProxyEnv});
  std::string id;
  for (int i = 0; i < 100 && id.empty(); ++i) {
    auto list = fltest::run_command({FAULTCTL_PATH, "approvals", "list", "--json"}, {.env = faultctl_env()}, 10s);
    auto j = nlohmann::json::parse(list.out, nullptr, false);
    if (j.is_array())
      for (const auto& p : j)
        if (p.value("path", "") == "/hold" && p.value("identity", "") == "ci") id = p.value("id", "");
    if (id.empty()) std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(id.empty()) << "no held request listed; faultd: " << faultd().describe();
  EXPECT_EQ(id.substr(0, id.find('.')), std::to_string(faultd().pid())) << id;
  auto approve = fltest::run_command({FAULTCTL_PATH, "approvals", "approve", id}, {.env = faultctl_env()}, 10s);
  EXPECT_TRUE(approve.status.is(0)) << approve.describe();
  auto held_done = held.wait(20s);
  ASSERT_TRUE(held_done && held_done->is(0)) << held.describe();
  EXPECT_EQ(held.out(), "upstream saw /hold[200]") << held.describe();

  // SIGHUP: the successor makes its gateway on the same listening socket and
  // reads the policy file anew (a new deny rule).
  gw_write_text(pol,
                R"({"mode":"enforce","default_allow":false,"rules":[)"
                R"({"name":"up","action":"allow","host":")" +
                    up +
                    R"("},)"
                    R"({"name":"no-more","action":"deny","host":")" +
                    up + R"(","path":"/after"}]})",
                0644);
  const pid_t old_pid = faultd().pid();
  ASSERT_EQ(::kill(old_pid, SIGHUP), 0);
  ASSERT_TRUE(faultd().wait_for("took over from the previous faultd", 20s, fltest::Stream::kStderr))
      << faultd().describe();
  ASSERT_TRUE(faultd().wait_for(" took over; relaying ", 10s, fltest::Stream::kStderr)) << faultd().describe();
  const std::string text = faultd().err();
  const size_t at = text.find("faultd: pid ");
  ASSERT_NE(at, std::string::npos) << text;
  const pid_t new_pid = std::stoi(text.substr(at + 12));
  ASSERT_NE(new_pid, old_pid);
  EXPECT_NE(text.find("the guard's gateway takes over the listener on 198.18.78.1:3128"), std::string::npos) << text;
  auto after = agent_curl({"-x", gw, "--proxy-user", "alice:alice-token-1", "http://" + up + "/after"});
  EXPECT_EQ(code_of(after), "[403]") << after.describe();
  EXPECT_NE(after.out.find("no-more"), std::string::npos) << after.describe();
  auto still = agent_curl({"-x", gw, "--proxy-user", "alice:alice-token-1", "http://" + up + "/still"});
  EXPECT_EQ(still.out, "upstream saw /still[200]") << still.describe();
  auto old_done = faultd().wait(20s);
  EXPECT_TRUE(old_done && old_done->is(0)) << faultd().describe();
  ::kill(new_pid, SIGTERM);
  for (int i = 0; i < 100 && gw_alive(new_pid); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(gw_alive(new_pid)) << "the new faultd did not stop on SIGTERM";

  // Every decision of both processes is in the activity log.
  std::ifstream in(log);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("\"/ok\""), std::string::npos) << all;
  EXPECT_NE(all.find("\"/after\""), std::string::npos) << all;
  upstream.stop();
  EXPECT_NE(upstream.out().find("REQ /hold"), std::string::npos) << upstream.out();
  EXPECT_EQ(upstream.out().find("REQ /after"), std::string::npos) << upstream.out();
}

// Bad gateway settings: exit 2 before anything starts, the flag (or the
// config file's field) named.
TEST(FaultdGatewayFlags, BadValuesExitTwoNamingTheFlag) {
  auto folder = faultline::TempFolder::create("fl-faultd-gw");  // removed at the end, whatever fails
  ASSERT_TRUE(folder.ok()) << folder.error().message;
  const std::string d = folder->path();
  const std::string good = d + "/tokens", open = d + "/tokens-open", empty = d + "/tokens-empty",
                    shorty = d + "/tokens-short", pol = d + "/path-rule.json", cfg = d + "/faultd.json";
  gw_write_text(good, "a=12345678\n", 0600);
  gw_write_text(open, "a=12345678\n", 0644);
  gw_write_text(empty, "# nobody\n", 0600);
  gw_write_text(shorty, "a=12345678\nb=short\n", 0600);
  gw_write_text(pol, R"({"mode":"enforce","rules":[{"name":"p","action":"deny","path":"/secrets/"}]})", 0644);
  gw_write_text(cfg, R"({"guard_gateway":"127.0.0.1:3128","guard_tokens":")" + open + R"("})", 0644);
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--guard-gateway", "127.0.0.1:3128", "--guard-tokens", open}, "--guard-tokens " + open + ": mode 0644"},
      {{"--guard-gateway", "gateway.example:3128", "--guard-tokens", good}, "--guard-gateway: 'gateway.example:3128'"},
      {{"--guard-gateway", "127.0.0.1:0", "--guard-tokens", good}, "--guard-gateway: '127.0.0.1:0'"},
      {{"--guard-gateway", "127.0.0.1:3128"}, "needs --guard-tokens"},
      {{"--guard-gateway", "127.0.0.1:3128", "--guard-tokens", empty}, "no ID=TOKEN line"},
      {{"--guard-gateway", "127.0.0.1:3128", "--guard-tokens", shorty}, "--guard-tokens " + shorty + ":2: b=..."},
      {{"--guard-gateway", "127.0.0.1:3128", "--guard-tokens", d + "/missing"}, "--guard-tokens " + d + "/missing"},
      {{"--guard-gateway", "127.0.0.1:3128", "--guard-tokens", good, "--guard-policy", pol},
       "--guard-policy " + pol + ": rule p"},
      {{"--guard-gateway", "127.0.0.1:3128", "--guard-tokens", good, "--guard-policy", d + "/none.json"},
       "--guard-policy " + d + "/none.json"},
      {{"--guard-gateway", "127.0.0.1:3128", "--guard-tokens", good, "--guard-json-log", "rel.jsonl"},
       "--guard-json-log: 'rel.jsonl'"},
      {{"--guard-tokens", good}, "--guard-tokens configures the guard's gateway: give --guard-gateway too"},
      {{"--guard-terminate-tls"}, "--guard-terminate-tls configures the guard's gateway"},
      {{"--config", cfg}, cfg + ": \"guard_tokens\" " + open + ": mode 0644"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {FAULTD_PATH, "--foreground"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto r = fltest::run_command(argv, {}, 20s);
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << "wanted: " << c.needle << "\n" << r.describe();
  }
}

}  // namespace
}  // namespace fldaemon
