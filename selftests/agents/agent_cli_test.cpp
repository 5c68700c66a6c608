// The real agent CLIs from npm (selftests/agents/package-lock.json): Claude Code
// in print mode and Codex in exec mode, each pointed at a local stand-in model
// server (standin.js) that speaks its provider's streaming API and records every
// request. Their HOME is a temporary folder, telemetry and update checks are off,
// and any proxy-able traffic that is not loopback goes to a dead port: nothing
// leaves 127.0.0.1. Under `faultctl guard` as a user (nobody when the test is
// root), through the proxy variables: the activity log with model and tokens, a
// denied model, an exhausted budget and an approval, for both CLIs where they
// apply, both CLIs through a terminating guard to the stand-in speaking HTTPS,
// and a python agent using requests. Under `faultctl guard` (root) the LLM
// fault's attempt counting is proven with Claude Code, which retries in its
// own loop, and Claude Code with the proxy variables removed is still judged
// (the cgroup's connect redirect).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "base/files.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/clock.h"
#include "selftests/lib/netns_pair.h"
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

  // Starts standin.js for `provider` ("anthropic" or "openai"); `env` may
  // carry STANDIN_TLS_CERT and STANDIN_TLS_KEY (HTTPS); `wrap` runs it under
  // another command (nsenter into a test namespace).
  void start_standin(const std::string& provider, std::vector<std::string> env = {},
                     std::vector<std::string> wrap = {}) {
    wrap.insert(wrap.end(), {"node", kAgentsDir + "/standin.js", provider, log_path(), kAnswer});
    standin_.emplace(ChildProcess::spawn(wrap, {.env = env}));
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
  [[nodiscard]] std::vector<std::string> codex_env(const std::string& provider_extra = "") const {
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
                   "wire_api = \"responses\"\n" +
                   provider_extra);
    auto env = base_env(true);
    env.insert(env.end(), {"CODEX_HOME=" + codex_home, "OPENAI_API_KEY=sk-standin", "OPENAI_BASE_URL="});
    return env;
  }

  // `faultctl guard FLAGS -- env -u (every proxy variable) CMD` as root, the
  // guard's folders and BPF pins under this test's own (`bpffs`), behind
  // `wrap` (nsenter into a test namespace, or nothing): the command ignores
  // the variables the guard sets, so only the cgroup's redirect brings it.
  [[nodiscard]] CommandResult root_guard_without_proxy_variables(const std::vector<std::string>& wrap,
                                                                 const std::vector<std::string>& flags,
                                                                 const std::vector<std::string>& cmd,
                                                                 std::vector<std::string> env,
                                                                 const std::string& bpffs) const {
    env.insert(env.end(), {"FAULTLINE_RUN_DIR=" + home() + "/run", "FAULTLINE_CA_DIR=" + home() + "/ca",
                           "FAULTLINE_STATE_DIR=" + home() + "/state", "XDG_RUNTIME_DIR=" + home(),
                           "FAULTLINE_BPFFS_ROOT=" + bpffs});
    std::vector<std::string> argv = wrap;
    argv.insert(argv.end(), {FAULTCTL_PATH, "guard"});
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", "env"});
    for (const char* k :
         {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "NO_PROXY", "no_proxy"})
      argv.insert(argv.end(), {"-u", k});
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return fltest::run_command(argv, {.env = env, .stop_grace = 5000ms}, 60s);
  }

  // A monitoring root guard's run of a CLI that ignored the proxy variables:
  // it finished with the stand-in's answer, its call was read (`llm: MODEL
  // in=7 out=5`) and reached the guard by the redirect (`redirected` then
  // "allow"), and its activity log `log` holds the stand-in alone, one `llm`
  // line of MODEL per request the stand-in saw. Those requests' count.
  size_t expect_judged_by_the_redirect(const CommandResult& monitor, const std::string& model,
                                       const std::string& redirected, const std::string& log) {
    EXPECT_TRUE(monitor.status.is(0)) << monitor.describe() << "\nstand-in:\n" << standin_->describe();
    EXPECT_NE(monitor.out.find(kAnswer), std::string::npos) << monitor.describe();
    const size_t upstream = requests().size();
    EXPECT_GE(upstream, 1u);
    EXPECT_NE(monitor.err.find("llm: " + model + " in=7 out=5"), std::string::npos) << monitor.err;
    EXPECT_NE(monitor.err.find(redirected + "allow"), std::string::npos) << monitor.err;
    size_t llm = 0;
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      auto e = nlohmann::json::parse(line);
      EXPECT_EQ(e["host"], "127.0.0.1:" + std::to_string(port_)) << "only the stand-in was called: " << e.dump();
      if (e["kind"] == "llm") {
        ++llm;
        EXPECT_EQ(e["llm"]["model"], model) << e.dump();
      }
    }
    EXPECT_EQ(llm, upstream) << monitor.err;
    return upstream;
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

// ---- under faultctl guard as a user: the proxy variables -----------------------

// faultctl (and so the CLI it runs) as an unprivileged user: nobody through
// setpriv when the test runs as root, as in guard_wire_test.cpp.
std::vector<std::string> as_user(std::vector<std::string> argv) { return fltest::as_nobody(std::move(argv)); }

// The real CLIs run by `faultctl guard` as a user: no cgroup, no BPF; they
// reach the stand-in only through the proxy variables the guard sets (it sets
// NO_PROXY empty, so loopback is proxied too).
class GuardedAgentCli : public AgentCli {
 protected:
  void SetUp() override {
    AgentCli::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    // nobody writes the CLI's HOME, the activity log, the CA, the budget state
    // and the approval socket (XDG_RUNTIME_DIR: its own, so `approvals list`
    // sees this guard only).
    ASSERT_EQ(::chmod(home().c_str(), 0777), 0);
    for (const char* d : {"/xdg", "/state"}) {  // the CA folder: the guard makes its own
      std::filesystem::create_directories(home() + d);
      ASSERT_EQ(::chmod((home() + d).c_str(), 0777), 0);
    }
  }

  // `env` with the guard's own settings; no proxy variable of ours (the guard
  // sets them) and no NO_PROXY that would let the CLI around it.
  [[nodiscard]] std::vector<std::string> guarded(std::vector<std::string> env) const {
    std::vector<std::string> out;
    for (auto& e : env) {
      const std::string k = e.substr(0, e.find('='));
      if (k == "NO_PROXY" || k == "no_proxy" || k == "HTTP_PROXY" || k == "HTTPS_PROXY" || k == "http_proxy" ||
          k == "https_proxy" || k == "ALL_PROXY")
        continue;
      out.push_back(std::move(e));
    }
    out.insert(out.end(), {"XDG_RUNTIME_DIR=" + home() + "/xdg", "FAULTLINE_STATE_DIR=" + home() + "/state",
                           "FAULTLINE_CA_DIR=" + home() + "/ca", "SSL_CERT_FILE=", "CURL_CA_BUNDLE="});
    return out;
  }

  [[nodiscard]] std::vector<std::string> guard_argv(const std::vector<std::string>& flags,
                                                    const std::vector<std::string>& cmd) const {
    std::vector<std::string> argv = {FAULTCTL_PATH, "guard"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return as_user(argv);
  }

  CommandResult guard(const std::vector<std::string>& flags, const std::vector<std::string>& cmd,
                      const std::vector<std::string>& env) {
    const auto t0 = std::chrono::steady_clock::now();
    CommandResult r = fltest::run_command(guard_argv(flags, cmd), {.env = guarded(env), .stop_grace = 3000ms}, 40s);
    last_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

  CommandResult faultctl(std::vector<std::string> args) {
    args.insert(args.begin(), FAULTCTL_PATH);
    return fltest::run_command(as_user(args), {.env = guarded(claude_env(false))}, 20s);
  }

  [[nodiscard]] std::string standin_host() const { return "127.0.0.1:" + std::to_string(port_); }

  [[nodiscard]] static std::vector<nlohmann::json> activity(const std::string& file) {
    std::vector<nlohmann::json> out;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  long long last_ms_ = 0;
};

// The model Claude Code 2.1.332 asks for by default in print mode (the
// monitor test below checks it, so a lockfile bump says so here first).
const std::string kClaudeModel = "claude-opus-5-5";

TEST_F(GuardedAgentCli, ClaudeCodeInMonitorIsLoggedWithItsModelAndTokens) {
  start_standin("anthropic");
  const std::string log = home() + "/activity.jsonl";
  CommandResult r = guard({"--json-log", log, "--identity", "claude-agent"}, {kClaude, "-p", "hi"}, claude_env(false));
  ASSERT_TRUE(r.status.is(0)) << r.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(r.out.find(kAnswer), std::string::npos) << r.describe();
  const auto reqs = requests();
  ASSERT_GE(reqs.size(), 1u);
  // Through the guard's proxy: it saw every call the stand-in saw.
  EXPECT_NE(r.err.find("requests " + std::to_string(reqs.size()) + "  allowed " + std::to_string(reqs.size())),
            std::string::npos)
      << r.err;
  EXPECT_EQ(reqs[0]["model"], kClaudeModel) << reqs[0].dump();
  size_t llm = 0;
  for (const auto& e : activity(log)) {
    EXPECT_EQ(e["host"], standin_host()) << "nothing but the stand-in: " << e.dump();
    if (e["kind"] == "llm") {
      ++llm;
      EXPECT_EQ(e["llm"]["model"], kClaudeModel) << e.dump();
      EXPECT_EQ(e["llm"]["in"], 7) << e.dump();
      EXPECT_EQ(e["llm"]["out"], 5) << e.dump();
      EXPECT_EQ(e["identity"], "claude-agent") << e.dump();
    }
  }
  EXPECT_EQ(llm, reqs.size()) << r.err;
  EXPECT_NE(r.err.find("llm: " + kClaudeModel + " in=7 out=5"), std::string::npos) << r.err;
  auto v = faultctl({"activity", "verify", log});
  EXPECT_TRUE(v.status.is(0)) << v.describe();
  std::printf("guard (monitor) -- claude -p hi: %zu request(s), %lld ms\n", reqs.size(), last_ms_);
}

TEST_F(GuardedAgentCli, ClaudeCodeDeniedModelEndsWithThePermissionMessageAndNoRetry) {
  start_standin("anthropic");
  CommandResult r =
      guard({"--enforce", "--terminate-tls", "--deny-model", kClaudeModel}, {kClaude, "-p", "hi"}, claude_env(false));
  EXPECT_FALSE(r.status.is(0)) << r.describe();
  const std::string all = r.out + r.err;
  EXPECT_NE(all.find("model " + kClaudeModel + " is denied"), std::string::npos) << r.describe();
  EXPECT_EQ(all.find(kAnswer), std::string::npos) << r.describe();
  EXPECT_EQ(requests().size(), 0u) << standin_->describe();
  // Exactly one attempt: the guard judged one request.
  EXPECT_NE(r.err.find("requests 1  allowed 0  denied 1"), std::string::npos) << r.err;
  std::printf("guard --deny-model -- claude -p hi: exit %s, %lld ms; it said: %s\n", r.status.str().c_str(), last_ms_,
              (r.out + r.err).c_str());
}

TEST_F(GuardedAgentCli, ClaudeCodeOverItsRequestBudgetEndsWith429AndNoRetry) {
  start_standin("anthropic");
  const std::vector<std::string> flags = {"--enforce", "--llm-request-budget", "1", "--llm-budget-window", "1d"};
  fltest::wait_clear_of_window_edge(std::chrono::hours(24));  // both runs in one window
  CommandResult first = guard(flags, {kClaude, "-p", "hi"}, claude_env(false));
  ASSERT_TRUE(first.status.is(0)) << first.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(first.out.find(kAnswer), std::string::npos) << first.describe();
  const size_t after_first = requests().size();
  ASSERT_EQ(after_first, 1u);
  const long long first_ms = last_ms_;
  CommandResult second = guard(flags, {kClaude, "-p", "hi"}, claude_env(false));
  EXPECT_FALSE(second.status.is(0)) << second.describe();
  const std::string all = second.out + second.err;
  EXPECT_NE(all.find("429"), std::string::npos) << second.describe();
  EXPECT_NE(all.find("budget"), std::string::npos) << second.describe();
  EXPECT_EQ(requests().size(), after_first) << "the second run reached the stand-in";
  EXPECT_NE(second.err.find("requests 1  allowed 0  denied 1"), std::string::npos) << second.err;
  std::printf("guard --llm-request-budget 1 -- claude -p hi: first %lld ms, second exit %s in %lld ms; it said: %s\n",
              first_ms, second.status.str().c_str(), last_ms_, all.c_str());
}

TEST_F(GuardedAgentCli, ClaudeCodeHeldForApprovalFinishesOnceApproved) {
  start_standin("anthropic");
  ChildProcess g = ChildProcess::spawn(guard_argv({"--enforce", "--approve", standin_host()}, {kClaude, "-p", "hi"}),
                                       {.env = guarded(claude_env(false)), .stop_grace = 3000ms});
  ASSERT_TRUE(g.wait_for("held for approval ", 20s, fltest::Stream::kStderr)) << g.describe();
  auto list = faultctl({"approvals", "list", "--json"});
  ASSERT_TRUE(list.status.is(0)) << list.describe();
  auto held = nlohmann::json::parse(list.out, nullptr, false);
  ASSERT_TRUE(held.is_array() && held.size() == 1) << list.out;
  EXPECT_EQ(held[0]["host"], standin_host()) << list.out;
  EXPECT_EQ(requests().size(), 0u);  // held: nothing reached the stand-in yet
  const std::string id = held[0]["id"].get<std::string>();
  auto ok = faultctl({"approvals", "approve", id});
  ASSERT_TRUE(ok.status.is(0)) << ok.describe();
  CommandResult end = g.finish(30s);
  ASSERT_TRUE(end.status.is(0)) << end.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(end.out.find(kAnswer), std::string::npos) << end.describe();
  EXPECT_EQ(requests().size(), 1u);
  EXPECT_NE(end.err.find("held 1  approved 1"), std::string::npos) << end.err;
}

// Codex honours HTTP_PROXY/http_proxy (reqwest) for its provider's base URL,
// and through HTTPS_PROXY also tries github.com, api.github.com and
// chatgpt.com even with analytics and the update check off: under the guard
// it runs enforcing with only the stand-in allowed, so nothing leaves loopback
// (those CONNECTs get the 403 and Codex carries on).
TEST_F(GuardedAgentCli, CodexExecIsLoggedWithItsModelAndTokens) {
  start_standin("openai");
  const std::string log = home() + "/activity.jsonl";
  auto env = codex_env();
  std::filesystem::permissions(home() + "/codex", std::filesystem::perms::all);
  CommandResult r = guard({"--enforce", "--default-deny", "--allow", standin_host(), "--json-log", log},
                          {kCodex, "exec", "--skip-git-repo-check", "-C", home(), "say hi"}, env);
  ASSERT_TRUE(r.status.is(0)) << r.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(r.out.find(kAnswer), std::string::npos) << r.describe();
  const auto reqs = requests();
  ASSERT_GE(reqs.size(), 1u);
  size_t llm = 0;
  for (const auto& e : activity(log)) {
    if (e["host"] != standin_host()) {
      EXPECT_EQ(e["verdict"], "deny") << e.dump();
      std::printf("codex also tried %s %s: denied\n", e.value("method", "").c_str(), e.value("host", "").c_str());
      continue;
    }
    if (e["kind"] == "llm") {
      ++llm;
      EXPECT_EQ(e["llm"]["model"], "gpt-standin") << e.dump();
      EXPECT_EQ(e["llm"]["in"], 7) << e.dump();
      EXPECT_EQ(e["llm"]["out"], 5) << e.dump();
    }
  }
  EXPECT_EQ(llm, reqs.size()) << r.err;
  EXPECT_NE(r.err.find("llm: gpt-standin in=7 out=5"), std::string::npos) << r.err;
  auto v = faultctl({"activity", "verify", log});
  EXPECT_TRUE(v.status.is(0)) << v.describe();
  std::printf("guard -- codex exec: %zu request(s), %lld ms\n", reqs.size(), last_ms_);
}

// Codex does not read x-should-retry: it takes a refused stream for a dropped
// one and reconnects `stream_max_retries` times (5 by default, with backoff)
// before it reports the 403. Bounded, nothing upstream, but six attempts: with
// `stream_max_retries = 0` in the provider it is exactly one.
TEST_F(GuardedAgentCli, CodexExecDeniedModelEndsWithThePermissionMessageAndBoundedRetries) {
  start_standin("openai");
  auto run = [&](const std::string& extra, const std::string& log) {
    auto env = codex_env(extra);
    std::filesystem::permissions(home() + "/codex", std::filesystem::perms::all);
    return guard({"--enforce", "--terminate-tls", "--default-deny", "--allow", standin_host(), "--deny-model",
                  "gpt-standin", "--json-log", log},
                 {kCodex, "exec", "--skip-git-repo-check", "-C", home(), "say hi"}, env);
  };
  auto attempts = [&](const std::string& log) {
    size_t n = 0;
    for (const auto& e : activity(log))
      if (e["host"] == standin_host()) {
        EXPECT_EQ(e["verdict"], "deny") << e.dump();
        ++n;
      }
    return n;
  };
  for (const auto& [extra, want] : {std::pair<std::string, size_t>{"", 6}, {"stream_max_retries = 0\n", 1}}) {
    const std::string log = home() + "/activity-" + std::to_string(want) + ".jsonl";
    CommandResult r = run(extra, log);
    EXPECT_FALSE(r.status.is(0)) << r.describe();
    EXPECT_NE(r.err.find("unexpected status 403 Forbidden: Faultline guard: denied by rule '--deny-model gpt-standin'"),
              std::string::npos)
        << r.describe();
    const size_t n = attempts(log);
    EXPECT_EQ(n, want) << extra << r.err;
    std::printf("guard --deny-model -- codex exec (%s): exit %s, %zu attempt(s), %lld ms\n",
                extra.empty() ? "defaults" : "stream_max_retries = 0", r.status.str().c_str(), n, last_ms_);
  }
  EXPECT_EQ(requests().size(), 0u) << standin_->describe();
}

// Codex under a token budget: the first call reserves --llm-default-reserve
// (6) of 10 tokens and settles to the 5 it was billed; the second guard run
// (the same state folder) cannot reserve 6 more and answers 429
// insufficient_quota, which Codex (with its default retries) takes as final:
// "Quota exceeded", one attempt, nothing reaches the stand-in.
TEST_F(GuardedAgentCli, CodexExecOverItsTokenBudgetEndsWith429AndNothingUpstream) {
  start_standin("openai");
  const std::vector<std::string> flags = {
      "--enforce", "--default-deny",        "--allow", standin_host(),        "--llm-token-budget",
      "10",        "--llm-default-reserve", "6",       "--llm-budget-window", "1d"};
  auto run = [&](const std::string& log) {
    auto env = codex_env();
    std::filesystem::permissions(home() + "/codex", std::filesystem::perms::all);
    auto f = flags;
    f.insert(f.end(), {"--json-log", log});
    return guard(f, {kCodex, "exec", "--skip-git-repo-check", "-C", home(), "say hi"}, env);
  };
  fltest::wait_clear_of_window_edge(std::chrono::hours(24));  // both runs in one window
  CommandResult first = run(home() + "/activity-1.jsonl");
  ASSERT_TRUE(first.status.is(0)) << first.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(first.out.find(kAnswer), std::string::npos) << first.describe();
  const size_t after_first = requests().size();
  ASSERT_EQ(after_first, 1u);
  EXPECT_NE(first.err.find("llm: gpt-standin in=7 out=5"), std::string::npos) << first.err;
  CommandResult second = run(home() + "/activity-2.jsonl");
  EXPECT_FALSE(second.status.is(0)) << second.describe();
  const std::string all = second.out + second.err;
  EXPECT_NE(second.err.find("ERROR: Quota exceeded."), std::string::npos) << second.describe();
  EXPECT_NE(second.err.find("/v1/responses -> deny (budget: LLM token budget exhausted: 5 of 10 output tokens"),
            std::string::npos)
      << second.err;
  EXPECT_EQ(requests().size(), after_first) << "the second run reached the stand-in";
  size_t denied = 0;
  for (const auto& e : activity(home() + "/activity-2.jsonl"))
    if (e["host"] == standin_host()) {
      EXPECT_EQ(e["verdict"], "deny") << e.dump();
      EXPECT_EQ(e["rule"], "budget") << e.dump();
      ++denied;
    }
  EXPECT_EQ(denied, 1u) << second.err;
  std::printf("guard --llm-token-budget 10 -- codex exec: first %s, second exit %s in %lld ms; it said: %s\n",
              first.status.str().c_str(), second.status.str().c_str(), last_ms_, all.c_str());
}

TEST_F(GuardedAgentCli, CodexExecHeldForApprovalFinishesOnceApproved) {
  start_standin("openai");
  auto env = codex_env();
  std::filesystem::permissions(home() + "/codex", std::filesystem::perms::all);
  ChildProcess g = ChildProcess::spawn(
      guard_argv({"--enforce", "--default-deny", "--allow", standin_host(), "--approve", standin_host()},
                 {kCodex, "exec", "--skip-git-repo-check", "-C", home(), "say hi"}),
      {.env = guarded(env), .stop_grace = 3000ms});
  ASSERT_TRUE(g.wait_for("held for approval ", 30s, fltest::Stream::kStderr)) << g.describe();
  auto list = faultctl({"approvals", "list", "--json"});
  ASSERT_TRUE(list.status.is(0)) << list.describe();
  auto held = nlohmann::json::parse(list.out, nullptr, false);
  ASSERT_TRUE(held.is_array() && held.size() == 1) << list.out;
  EXPECT_EQ(held[0]["host"], standin_host()) << list.out;
  EXPECT_EQ(requests().size(), 0u);  // held: nothing reached the stand-in yet
  auto ok = faultctl({"approvals", "approve", held[0]["id"].get<std::string>()});
  ASSERT_TRUE(ok.status.is(0)) << ok.describe();
  CommandResult end = g.finish(40s);
  ASSERT_TRUE(end.status.is(0)) << end.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(end.out.find(kAnswer), std::string::npos) << end.describe();
  EXPECT_EQ(requests().size(), 1u);
  EXPECT_NE(end.err.find("held 1  approved 1"), std::string::npos) << end.err;
}

// Claude Code (its native binary) against an HTTPS model server through a
// terminating guard: it trusts the guard's leaf through NODE_EXTRA_CA_CERTS,
// the call is judged by its path inside the tunnel and logged with its model
// and tokens; with NODE_EXTRA_CA_CERTS and SSL_CERT_FILE removed it refuses
// the leaf at once (no retry) and nothing reaches the stand-in. The stand-in's
// own certificate is a self-signed one the guard is told to trust
// (--upstream-ca).
TEST_F(GuardedAgentCli, ClaudeCodeTrustsTheTerminatingGuardThroughNodeExtraCaCerts) {
  const std::string cert = home() + "/standin.pem", key = home() + "/standin.key";
  CommandResult made = fltest::run_command(
      {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
       "-out", cert, "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1"},
      {}, 20s);
  ASSERT_TRUE(made.status.is(0)) << made.describe();
  ASSERT_EQ(::chmod(cert.c_str(), 0644), 0);
  start_standin("anthropic", {"STANDIN_TLS_CERT=" + cert, "STANDIN_TLS_KEY=" + key});
  auto env = claude_env(false);
  for (auto& e : env)
    if (e.rfind("ANTHROPIC_BASE_URL=", 0) == 0) e = "ANTHROPIC_BASE_URL=https://" + standin_host();
  const std::string log = home() + "/activity.jsonl";
  const std::vector<std::string> flags = {"--terminate-tls", "--upstream-ca", cert, "--llm-host",
                                          standin_host(),    "--json-log",    log};
  CommandResult r = guard(flags, {kClaude, "-p", "hi"}, env);
  ASSERT_TRUE(r.status.is(0)) << r.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(r.out.find(kAnswer), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("POST https://" + standin_host() + "/v1/messages?beta=true -> allow"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("llm: " + kClaudeModel + " in=7 out=5"), std::string::npos) << r.err;
  const size_t upstream = requests().size();
  EXPECT_EQ(upstream, 1u) << standin_->describe();
  size_t llm = 0;
  for (const auto& e : activity(log))
    if (e["kind"] == "llm") ++llm;
  EXPECT_EQ(llm, 1u) << r.err;

  CommandResult refused =
      guard(flags, {"env", "-u", "NODE_EXTRA_CA_CERTS", "-u", "SSL_CERT_FILE", kClaude, "-p", "hi"}, env);
  EXPECT_FALSE(refused.status.is(0)) << refused.describe();
  EXPECT_NE((refused.out + refused.err).find("SSL certificate verification failed"), std::string::npos)
      << refused.describe();
  EXPECT_NE(refused.err.find("requests 0  allowed 0"), std::string::npos) << refused.err;
  EXPECT_EQ(requests().size(), upstream) << standin_->describe();
}

// Codex against the HTTPS stand-in through a terminating guard: it trusts the
// guard's leaf (through one of the CA variables the guard sets; which one is
// not isolated: without SSL_CERT_FILE it keeps reconnecting rather than
// failing, too slow for a test); the Responses call is judged inside the
// tunnel and logged with its model and tokens.
TEST_F(GuardedAgentCli, CodexExecTrustsTheTerminatingGuardsCa) {
  const std::string cert = home() + "/standin.pem", key = home() + "/standin.key";
  CommandResult made = fltest::run_command(
      {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
       "-out", cert, "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1"},
      {}, 20s);
  ASSERT_TRUE(made.status.is(0)) << made.describe();
  ASSERT_EQ(::chmod(cert.c_str(), 0644), 0);
  start_standin("openai", {"STANDIN_TLS_CERT=" + cert, "STANDIN_TLS_KEY=" + key});
  auto env = codex_env();
  const std::string config = home() + "/codex/config.toml";
  auto text = faultline::read_text_file(config);
  ASSERT_TRUE(text.ok());
  std::string toml = *text;
  toml.replace(toml.find("http://127.0.0.1"), 4, "https");
  write_text(config, toml);
  std::filesystem::permissions(home() + "/codex", std::filesystem::perms::all);
  const std::string log = home() + "/activity.jsonl";
  CommandResult r = guard({"--enforce", "--default-deny", "--allow", standin_host(), "--terminate-tls", "--upstream-ca",
                           cert, "--llm-host", standin_host(), "--json-log", log},
                          {kCodex, "exec", "--skip-git-repo-check", "-C", home(), "say hi"}, env);
  ASSERT_TRUE(r.status.is(0)) << r.describe() << "\nstand-in:\n" << standin_->describe();
  EXPECT_NE(r.out.find(kAnswer), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("POST https://" + standin_host() + "/v1/responses -> allow"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("llm: gpt-standin in=7 out=5"), std::string::npos) << r.err;
  EXPECT_EQ(requests().size(), 1u) << standin_->describe();
}

// A python agent with requests (Debian's python3-requests): it reads the
// proxy variables, so an allowed host answers and a denied one gets the 403 JSON.
TEST_F(GuardedAgentCli, PythonRequestsAgentAllowedPassesDeniedGets403Json) {
  if (fltest::run_command({"python3", "-c", "import requests"}, {}, 10s).status.is(0) == false)
    GTEST_SKIP() << "*** SKIPPED: python3-requests is not installed: run scripts/install-deps.sh ***";
  start_standin("anthropic");
  const std::string agent =
      "import requests, sys, json\n"
      "ok = requests.post(sys.argv[1] + '/v1/messages', json={'model': 'claude-x', 'max_tokens': 8,"
      " 'messages': [{'role': 'user', 'content': 'hi'}]}, timeout=20)\n"
      "print('allowed', ok.status_code, ok.json()['content'][0]['text'])\n"
      "no = requests.get(sys.argv[2] + '/exfil', timeout=20)\n"
      "print('denied', no.status_code, json.dumps(no.json()))\n";
  const std::string denied_host = "127.0.0.1:9";  // nothing listens: the guard answers
  CommandResult r =
      guard({"--enforce", "--default-deny", "--allow", standin_host()},
            {"python3", "-c", agent, "http://" + standin_host(), "http://" + denied_host}, claude_env(false));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("allowed 200 " + kAnswer), std::string::npos) << r.out;
  const auto at = r.out.find("denied 403 ");
  ASSERT_NE(at, std::string::npos) << r.out;
  auto j = nlohmann::json::parse(r.out.substr(at + 11, r.out.find('\n', at) - at - 11), nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["error"], "denied by policy");
  EXPECT_EQ(j["rule"], "");  // the default decided
  EXPECT_FALSE(j["reason"].get<std::string>().empty());
  EXPECT_EQ(j["request_id"].get<std::string>().rfind("req_", 0), 0u) << j.dump();
  EXPECT_EQ(requests().size(), 1u);
  std::printf("guard -- python requests agent: %lld ms\n", last_ms_);
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

// Claude Code as root with the guard's proxy variables removed from its
// environment (`env -u ...`): it connects to the stand-in directly, and the
// cgroup's connect redirect brings each connection to the guard all the same.
// In monitor the call is logged with its model and tokens; enforcing
// --deny-model ends it with the permission message and nothing upstream.
TEST_F(AgentCli, ClaudeCodeIgnoringTheProxyVariablesIsStillJudgedAsRoot) {
  FL_REQUIRE_ROOT("faultctl guard's transparent capture (a cgroup and cgroup BPF programs)");
  start_standin("anthropic");
  const std::string bpffs = "/sys/fs/bpf/fl-agent-cli-nopx-" + std::to_string(::getpid());
  auto run = [&](const std::vector<std::string>& flags) {
    return root_guard_without_proxy_variables({}, flags, {kClaude, "-p", "hi"}, claude_env(false), bpffs);
  };
  const std::string log = home() + "/activity.jsonl";
  // --llm-host makes it the request guard (as root, a guard with none of its
  // flags is the kernel's connect guard alone: docs/guard.md).
  CommandResult monitor = run({"--llm-host", "127.0.0.1:" + std::to_string(port_), "--json-log", log});
  CommandResult denied = run({"--enforce", "--terminate-tls", "--deny-model", "claude-opus-5-5"});
  fltest::remove_test_bpffs_root(bpffs);

  // Taken by the kernel's redirect, not through the variables.
  const std::string redirected = "/v1/messages?beta=true (redirected, to 127.0.0.1:" + std::to_string(port_) + ") -> ";
  const size_t upstream = expect_judged_by_the_redirect(monitor, "claude-opus-5-5", redirected, log);
  ASSERT_GE(upstream, 1u);

  EXPECT_FALSE(denied.status.is(0)) << denied.describe();
  const std::string all = denied.out + denied.err;
  EXPECT_NE(all.find("model claude-opus-5-5 is denied"), std::string::npos) << denied.describe();
  EXPECT_EQ(all.find(kAnswer), std::string::npos) << denied.describe();
  EXPECT_EQ(requests().size(), upstream) << "the denied run reached the stand-in";
  EXPECT_NE(denied.err.find("requests 1  allowed 0  denied 1"), std::string::npos) << denied.err;
  EXPECT_NE(denied.err.find(redirected + "deny"), std::string::npos) << denied.err;
}

// Codex as root with the guard's proxy variables removed: the cgroup's connect
// redirect brings its calls to the guard all the same. Codex also looks up
// github.com and chatgpt.com (through the proxy variables it CONNECTs to
// them: CodexExecIsLoggedWithItsModelAndTokens); without them it would
// resolve them itself, so the stand-in, the guard and Codex all run in a
// network namespace of this test's own with nothing but lo: no resolver and
// no route, nothing can leave. In monitor each call is logged with its model
// and tokens; enforcing --deny-model ends the run after one refused attempt
// (stream_max_retries = 0), nothing upstream.
TEST_F(AgentCli, CodexIgnoringTheProxyVariablesIsStillJudgedAsRoot) {
  FL_REQUIRE_ROOT("faultctl guard's transparent capture (a cgroup and cgroup BPF programs) and a test namespace");
  const fltest::Netns ns("fl-codex-" + std::to_string(::getpid()), {.ipv6 = false});
  const std::vector<std::string> in_ns = {"nsenter", "--net=" + ns.path(), "--"};
  start_standin("openai", {}, in_ns);
  const std::string bpffs = "/sys/fs/bpf/fl-agent-cli-codex-" + std::to_string(::getpid());
  const std::string standin = "127.0.0.1:" + std::to_string(port_);
  auto run = [&](const std::vector<std::string>& flags, const std::string& provider_extra) {
    return root_guard_without_proxy_variables(in_ns, flags,
                                              {kCodex, "exec", "--skip-git-repo-check", "-C", home(), "say hi"},
                                              codex_env(provider_extra), bpffs);
  };
  const std::string log = home() + "/activity.jsonl", denied_log = home() + "/denied.jsonl";
  CommandResult monitor = run({"--llm-host", standin, "--json-log", log}, "");
  CommandResult denied = run({"--enforce", "--terminate-tls", "--default-deny", "--allow", standin, "--deny-model",
                              "gpt-standin", "--json-log", denied_log},
                             "stream_max_retries = 0\n");
  fltest::remove_test_bpffs_root(bpffs);

  // Taken by the kernel's redirect, not through the variables.
  const std::string redirected = "(redirected, to " + standin + ") -> ";
  const size_t upstream = expect_judged_by_the_redirect(monitor, "gpt-standin", redirected, log);
  ASSERT_GE(upstream, 1u);

  EXPECT_FALSE(denied.status.is(0)) << denied.describe();
  EXPECT_NE(denied.err.find("denied by rule '--deny-model gpt-standin'"), std::string::npos) << denied.describe();
  EXPECT_EQ((denied.out + denied.err).find(kAnswer), std::string::npos) << denied.describe();
  EXPECT_NE(denied.err.find(redirected + "deny"), std::string::npos) << denied.err;
  EXPECT_EQ(requests().size(), upstream) << "the denied run reached the stand-in";
  std::printf("guard (transparent, own netns) -- codex exec: monitor %zu call(s); denied: %s\n", upstream,
              denied.status.str().c_str());
}

}  // namespace
