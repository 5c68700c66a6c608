// The real agent CLIs from npm (selftests/agents/package-lock.json): Claude Code
// in print mode and Codex in exec mode, each pointed at a local stand-in model
// server (standin.js) that speaks its provider's streaming API and records every
// request. Their HOME is a temporary folder, telemetry and update checks are off,
// and any proxy-able traffic that is not loopback goes to a dead port: nothing
// leaves 127.0.0.1. Under `faultctl guard` (root) the LLM fault's attempt
// counting is proven with Claude Code, which retries in its own loop.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/files.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/require_root.h"
#include "selftests/lib/test_bpffs.h"

namespace {

using fltest::ChildProcess;
using fltest::CommandResult;
using namespace std::chrono_literals;

const std::string kAgentsDir = AGENTS_DIR;
const std::string kClaude = kAgentsDir + "/node_modules/.bin/claude";
const std::string kCodex = kAgentsDir + "/node_modules/.bin/codex";
const std::string kAnswer = "Hello from the stand-in";

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

// One stand-in model server and the temporary HOME of the CLI that talks to it.
class AgentCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kClaude) && std::filesystem::exists(kCodex))
        << "the agent CLIs are not installed: run scripts/install-deps.sh (npm ci in " << kAgentsDir << ")";
    auto home = faultline::TempFolder::create("fl-agent-cli");
    ASSERT_TRUE(home.ok()) << home.error().message;
    home_.emplace(std::move(*home));
  }
  void TearDown() override {
    if (standin_) standin_->stop();
  }

  [[nodiscard]] std::string home() const { return home_->path(); }
  [[nodiscard]] std::string log_path() const { return home() + "/standin.log"; }

  // Starts standin.js for `provider` ("anthropic" or "openai").
  void start_standin(const std::string& provider) {
    standin_.emplace(ChildProcess::spawn({"node", kAgentsDir + "/standin.js", provider, log_path(), kAnswer}));
    auto line = standin_->wait_line_starting("listening ", 10s);
    ASSERT_TRUE(line) << standin_->describe();
    port_ = std::stoi(line->substr(10));
  }

  // Every request the stand-in saw, in order.
  [[nodiscard]] std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream f(log_path());
    for (std::string l; std::getline(f, l);)
      if (!l.empty()) out.push_back(nlohmann::json::parse(l));
    return out;
  }

  // What both CLIs get: a private HOME, nothing of the runner's own settings,
  // and a dead proxy for anything that is not loopback (`with_dead_proxy`).
  [[nodiscard]] std::vector<std::string> base_env(bool with_dead_proxy) const {
    std::vector<std::string> env = {"HOME=" + home(), "XDG_CONFIG_HOME=" + home() + "/.config",
                                    "XDG_CACHE_HOME=" + home() + "/.cache", "XDG_DATA_HOME=" + home() + "/.local"};
    if (with_dead_proxy)
      for (const char* k : {"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"})
        env.push_back(std::string(k) + "=http://127.0.0.1:9");
    env.push_back("NO_PROXY=127.0.0.1,localhost");
    env.push_back("no_proxy=127.0.0.1,localhost");
    return env;
  }

  // Claude Code: the base URL and a fake key; telemetry, error reports, the
  // auto-updater and every other nonessential call off (its documented switches).
  [[nodiscard]] std::vector<std::string> claude_env(bool with_dead_proxy = true) const {
    auto env = base_env(with_dead_proxy);
    env.insert(env.end(),
               {"ANTHROPIC_BASE_URL=http://127.0.0.1:" + std::to_string(port_), "ANTHROPIC_API_KEY=sk-ant-standin",
                "ANTHROPIC_AUTH_TOKEN=", "CLAUDE_CONFIG_DIR=" + home() + "/.claude", "DISABLE_TELEMETRY=1",
                "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
                "CLAUDE_CODE_USE_BEDROCK=", "CLAUDE_CODE_USE_VERTEX="});
    return env;
  }

  // Codex: a provider of its own in CODEX_HOME/config.toml (the Responses API
  // at the stand-in), analytics, feedback and the update check off.
  [[nodiscard]] std::vector<std::string> codex_env() const {
    const std::string codex_home = home() + "/codex";
    std::filesystem::create_directories(codex_home);
    write_text(codex_home + "/config.toml",
               "model = \"gpt-standin\"\n"
               "model_provider = \"standin\"\n"
               "check_for_update_on_startup = false\n"
               "[analytics]\nenabled = false\n"
               "[feedback]\nenabled = false\n"
               "[model_providers.standin]\n"
               "name = \"stand-in\"\n"
               "base_url = \"http://127.0.0.1:" +
                   std::to_string(port_) +
                   "/v1\"\n"
                   "env_key = \"OPENAI_API_KEY\"\n"
                   "wire_api = \"responses\"\n");
    auto env = base_env(true);
    env.insert(env.end(), {"CODEX_HOME=" + codex_home, "OPENAI_API_KEY=sk-standin", "OPENAI_BASE_URL="});
    return env;
  }

  std::optional<faultline::TempFolder> home_;
  std::optional<ChildProcess> standin_;
  int port_ = 0;
};

TEST_F(AgentCli, ClaudeCodePrintModeAnswersFromTheStandIn) {
  start_standin("anthropic");
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult r = fltest::run_command({kClaude, "-p", "hi"}, {.env = claude_env()}, 30s);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  ASSERT_TRUE(r.status.is(0)) << r.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(r.out.find(kAnswer), std::string::npos) << r.describe();
  const auto reqs = requests();
  ASSERT_GE(reqs.size(), 1u);
  // Every call was a streamed Messages call with the fake key.
  for (const auto& q : reqs) {
    EXPECT_EQ(q["method"], "POST");
    EXPECT_EQ(q["path"].get<std::string>().rfind("/v1/messages", 0), 0u) << q.dump();
    EXPECT_EQ(q["headers"].value("x-api-key", ""), "sk-ant-standin");
  }
  std::printf("claude -p hi: %zu request(s), %lld ms\n", reqs.size(), static_cast<long long>(ms.count()));
}

TEST_F(AgentCli, CodexExecAnswersFromTheStandIn) {
  start_standin("openai");
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult r =
      fltest::run_command({kCodex, "exec", "--skip-git-repo-check", "-C", home(), "say hi"}, {.env = codex_env()}, 30s);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  ASSERT_TRUE(r.status.is(0)) << r.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(r.out.find(kAnswer), std::string::npos) << r.describe();
  const auto reqs = requests();
  ASSERT_GE(reqs.size(), 1u);
  for (const auto& q : reqs) {
    EXPECT_EQ(q["method"], "POST");
    EXPECT_EQ(q["path"], "/v1/responses") << q.dump();
    EXPECT_EQ(q["headers"].value("authorization", ""), "Bearer sk-standin");
    EXPECT_EQ(q["stream"], true);
  }
  std::printf("codex exec: %zu request(s), %lld ms\n", reqs.size(), static_cast<long long>(ms.count()));
}

// ---- under faultctl guard, as root -------------------------------------------

// Claude Code retries an overloaded answer in its own loop, sending
// x-stainless-retry-count: 0 every time: the fault's attempts are counted by
// the request's fingerprint, so exactly two attempts are faulted and the third
// reaches the stand-in.
TEST_F(AgentCli, GuardFaultsClaudeCodeExactlyTheAttemptsAsked) {
  FL_REQUIRE_ROOT("faultctl guard (a cgroup and cgroup BPF programs)");
  start_standin("anthropic");
  const std::string bpffs = "/sys/fs/bpf/fl-agent-cli-" + std::to_string(::getpid());
  auto env = claude_env(false);
  env.insert(env.end(), {"FAULTLINE_RUN_DIR=" + home() + "/run", "FAULTLINE_CA_DIR=" + home() + "/ca",
                         "FAULTLINE_BPFFS_ROOT=" + bpffs});
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult r = fltest::run_command(
      {FAULTCTL_PATH, "guard", "--fault-host", "127.0.0.1:" + std::to_string(port_), "--fault-llm", "overloaded",
       "--fault-llm-provider", "anthropic", "--fault-attempts", "2", "--", kClaude, "-p", "hi"},
      {.env = env, .stop_grace = 5000ms}, 60s);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  fltest::remove_test_bpffs_root(bpffs);
  ASSERT_TRUE(r.status.is(0)) << r.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(r.out.find(kAnswer), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("llm_overloaded  2"), std::string::npos) << r.err;
  const auto reqs = requests();
  EXPECT_EQ(reqs.size(), 1u) << "the stand-in saw " << reqs.size() << " request(s)";
  std::printf("faultctl guard --fault-attempts 2 -- claude -p hi: %lld ms\n", static_cast<long long>(ms.count()));
}

}  // namespace
