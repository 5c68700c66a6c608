// faultctl guard --wasm-policy end to end: the real faultctl (as nobody when
// root) loads the example plugins built from C by clang's wasm32 target
// (selftests/wasm_plugins), and curl's requests through its proxy to a
// loopback upstream are judged by them: deny_admin denies a POST to an /admin
// path with a 403 naming wasm:deny_admin.wasm (monitor: forwarded, "would
// deny"); misbehave's endless loop and trap fail open as findings (kind wasm),
// or closed with --wasm-fail-closed (rule wasm-policy); a module that imports
// a clock, a file that is not WebAssembly and bad flags exit 2 at start.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/tls/tls_harness.h"

namespace {

using fltest::CommandResult;
using fltest::UniqueFd;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kWasmFaultctl = FAULTCTL_PATH;
const std::string kWasmPluginDir = WASM_PLUGIN_DIR;

class WasmUpstream {
 public:
  WasmUpstream()
      : server_([this](UniqueFd fd) {
          auto request = fltest::read_one_request(fd.get());
          if (!request) return;
          {
            std::lock_guard lock(mu_);
            seen_.push_back(request->substr(0, request->find("\r\n")));
          }
          const std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
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

class GuardWasmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kWasmPluginDir.empty())
      GTEST_SKIP() << "*** SKIPPED: clang's wasm32 target or wasm-ld is missing, so the example plugins were not "
                      "built: run scripts/install-deps.sh (clang, lld) and re-run cmake ***";
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path());
  }

  // The plugin copied where the guard's user (nobody) can read it.
  std::string plugin(const std::string& name) {
    const std::string to = dir_.file(name + ".wasm");
    std::filesystem::copy_file(kWasmPluginDir + "/" + name + ".wasm", to,
                               std::filesystem::copy_options::overwrite_existing);
    EXPECT_EQ(::chmod(to.c_str(), 0644), 0);
    return to;
  }

  CommandResult guard(std::vector<std::string> flags, const std::string& script) {
    std::vector<std::string> argv = {kWasmFaultctl, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--json-log", dir_.file("activity.jsonl"), "--", "sh", "-c", script});
    return fltest::run_command(fltest::as_nobody(std::move(argv)), {.env = env_}, 90s);
  }

  // curl's body and status, one line: BODY[CODE]
  static std::string curl(const std::string& method, const std::string& url) {
    return "curl -sS -X " + method + " -w '[%{http_code}]\\n' --max-time 30 " + url + "; ";
  }

  std::vector<Json> lines_of(const std::string& kind) {
    return fltest::activity_of_kind(dir_.file("activity.jsonl"), kind);
  }

  // The log's chains verify, lines with a reason among them.
  void verify_log() {
    auto v = fltest::run_command({kWasmFaultctl, "activity", "verify", dir_.file("activity.jsonl")}, {}, 30s);
    EXPECT_TRUE(v.status.is(0)) << v.describe();
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

std::vector<std::string> lines(const std::string& out) {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

// The denial's JSON of a line "BODY[403]".
Json denial(const std::string& line) {
  EXPECT_EQ(line.substr(line.rfind('[')), "[403]") << line;
  return Json::parse(line.substr(0, line.rfind('[')), nullptr, false);
}

TEST_F(GuardWasmTest, ThePluginDeniesAPostToAnAdminPathWith403NamingIt) {
  WasmUpstream up;
  const std::string script =
      curl("POST", up.url("/admin/users")) + curl("GET", up.url("/admin/users")) + curl("POST", up.url("/api/items"));
  auto r = guard({"--enforce", "--wasm-policy", plugin("deny_admin")}, script);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const auto out = lines(r.out);
  ASSERT_EQ(out.size(), 3u) << r.out;
  const Json j = denial(out[0]);
  ASSERT_TRUE(j.is_object()) << out[0];
  EXPECT_EQ(j.value("rule", ""), "wasm:deny_admin.wasm") << out[0];
  EXPECT_EQ(j.value("reason", ""), "POST to an /admin path") << out[0];
  EXPECT_EQ(out[1], "ok[200]");
  EXPECT_EQ(out[2], "ok[200]");
  EXPECT_EQ(up.seen(), (std::vector<std::string>{"GET /admin/users HTTP/1.1", "POST /api/items HTTP/1.1"}));
  EXPECT_NE(r.err.find("deny (rule wasm:deny_admin.wasm: POST to an /admin path)"), std::string::npos) << r.err;
  std::vector<Json> denied;
  for (const Json& l : lines_of("request"))
    if (l.value("rule", "") == "wasm:deny_admin.wasm") denied.push_back(l);
  ASSERT_EQ(denied.size(), 1u) << r.err;
  EXPECT_EQ(denied[0].value("verdict", ""), "deny");
  EXPECT_EQ(denied[0].value("method", ""), "POST");
  EXPECT_EQ(denied[0].value("path", ""), "/admin/users");
  // The plugin's reason on its line; none on the lines of allowed requests.
  EXPECT_EQ(denied[0].value("reason", ""), "POST to an /admin path") << denied[0];
  for (const Json& l : lines_of("request"))
    if (l.value("verdict", "") == "allow") EXPECT_FALSE(l.contains("reason")) << l;
  verify_log();
}

TEST_F(GuardWasmTest, InMonitorModeThePluginsDenialIsReportedAndForwarded) {
  WasmUpstream up;
  auto r = guard({"--wasm-policy", plugin("deny_admin")}, curl("POST", up.url("/admin/users")));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "ok[200]\n");
  EXPECT_EQ(up.seen().size(), 1u);
  EXPECT_NE(r.err.find("would deny (rule wasm:deny_admin.wasm: POST to an /admin path; monitor: forwarded)"),
            std::string::npos)
      << r.err;
  const auto decided = lines_of("request");
  ASSERT_EQ(decided.size(), 1u) << r.err;
  EXPECT_EQ(decided[0].value("verdict", ""), "deny");
  EXPECT_EQ(decided[0].value("reason", ""), "POST to an /admin path") << decided[0];
  verify_log();
}

TEST_F(GuardWasmTest, AnEndlessLoopOrATrapFailsOpenAsAFinding) {
  WasmUpstream up;
  const std::string script =
      curl("GET", up.url("/spin")) + curl("GET", up.url("/trap")) + curl("GET", up.url("/garbage"));
  auto r = guard({"--enforce", "--wasm-policy", plugin("misbehave")}, script);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "ok[200]\nok[200]\nok[200]\n");
  EXPECT_EQ(up.seen().size(), 3u);
  for (const char* said : {"wasm: the policy plugin misbehave.wasm failed: out of fuel in decide (1000000 "
                           "instructions) (failing open: not stopped)",
                           "wasm: the policy plugin misbehave.wasm failed: a trap in decide: unreachable",
                           "wasm: the policy plugin misbehave.wasm failed: the answer is not JSON"})
    EXPECT_NE(r.err.find(said), std::string::npos) << said << "\n" << r.err;
  const auto findings = lines_of("wasm");
  ASSERT_EQ(findings.size(), 3u) << r.err;
  for (const Json& f : findings) {
    EXPECT_EQ(f.value("rule", ""), "wasm:misbehave.wasm");
    EXPECT_EQ(f.value("verdict", ""), "allow");
  }
  EXPECT_EQ(findings[0].value("path", ""), "/spin");
  EXPECT_EQ(findings[0].value("reason", ""),
            "the policy plugin misbehave.wasm failed: out of fuel in decide (1000000 instructions)")
      << findings[0];
  verify_log();
}

TEST_F(GuardWasmTest, WithFailClosedAFailingPluginDenies) {
  WasmUpstream up;
  const std::string script = curl("GET", up.url("/spin")) + curl("GET", up.url("/trap")) + curl("GET", up.url("/fine"));
  auto r = guard({"--enforce", "--wasm-policy", plugin("misbehave"), "--wasm-fail-closed"}, script);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const auto out = lines(r.out);
  ASSERT_EQ(out.size(), 3u) << r.out;
  Json j = denial(out[0]);
  EXPECT_EQ(j.value("rule", ""), "wasm-policy") << out[0];
  EXPECT_NE(j.value("reason", "").find("the policy plugin misbehave.wasm failed: out of fuel"), std::string::npos)
      << out[0];
  j = denial(out[1]);
  EXPECT_EQ(j.value("rule", ""), "wasm-policy") << out[1];
  EXPECT_NE(j.value("reason", "").find("a trap in decide"), std::string::npos) << out[1];
  EXPECT_EQ(out[2], "ok[200]");
  EXPECT_EQ(up.seen(), (std::vector<std::string>{"GET /fine HTTP/1.1"}));
  const auto findings = lines_of("wasm");
  ASSERT_EQ(findings.size(), 2u) << r.err;
  EXPECT_EQ(findings[0].value("verdict", ""), "deny");
  EXPECT_EQ(findings[0].value("rule", ""), "wasm:misbehave.wasm");
  std::vector<Json> closed;
  for (const Json& l : lines_of("request"))
    if (l.value("rule", "") == "wasm-policy") closed.push_back(l);
  ASSERT_EQ(closed.size(), 2u) << r.err;
  EXPECT_NE(closed[0].value("reason", "").find("the policy plugin misbehave.wasm failed: out of fuel"),
            std::string::npos)
      << closed[0];
  verify_log();
}

TEST_F(GuardWasmTest, ARequestTheRulesDenyNeverReachesThePlugin) {
  // misbehave's /spin would be an out-of-fuel finding had the plugin been asked.
  WasmUpstream up;
  const std::string port = up.url("").substr(std::string("http://127.0.0.1:").size());
  auto r = guard({"--enforce", "--deny", "127.0.0.1:" + port, "--wasm-policy", plugin("misbehave")},
                 curl("GET", up.url("/spin")));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const Json j = denial(lines(r.out).at(0));
  EXPECT_EQ(j.value("rule", ""), "--deny 127.0.0.1:" + port) << r.out;
  EXPECT_TRUE(up.seen().empty());
  EXPECT_TRUE(lines_of("wasm").empty()) << r.err;
  EXPECT_EQ(r.err.find("wasm:"), std::string::npos) << r.err;
}

TEST_F(GuardWasmTest, AModuleWithAnImportIsRefusedAtStart) {
  const std::string file = plugin("imports_clock");
  auto r = guard({"--enforce", "--wasm-policy", file}, "touch " + dir_.file("ran"));
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--wasm-policy " + file +
                       ": imports wasi_snapshot_preview1.clock_time_get (a function): a "
                       "policy plugin runs with no imports at all"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::ifstream(dir_.file("ran")).good());
}

TEST_F(GuardWasmTest, BadFlagsAndFilesExit2NamingThem) {
  {
    std::ofstream(dir_.file("not.wasm")) << "not webassembly";
    ::chmod(dir_.file("not.wasm").c_str(), 0644);
  }
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--wasm-fail-closed"}, "--wasm-fail-closed applies to --wasm-policy"},
      {{"--wasm-policy", dir_.file("missing.wasm")}, "--wasm-policy " + dir_.file("missing.wasm") + ": No such file"},
      {{"--wasm-policy", dir_.file("not.wasm")},
       "--wasm-policy " + dir_.file("not.wasm") + ": not a valid WebAssembly module"},
      {{"--wasm-policy", plugin("deny_admin"), "--wasm-policy", dir_.file("not.wasm")}, dir_.file("not.wasm")},
      {{"--wasm-policy", ""}, "--wasm-policy: empty file name"},
  };
  for (const auto& [flags, said] : cases) {
    auto r = guard(flags, "touch " + dir_.file("ran"));
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(said), std::string::npos) << said << "\n" << r.err;
    EXPECT_FALSE(std::ifstream(dir_.file("ran")).good()) << said;
  }
}

}  // namespace
