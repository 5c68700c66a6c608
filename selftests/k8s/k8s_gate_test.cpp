// The guard's Kubernetes rules with real kubectl against a stand-in API server
// (apiserver.js, node + the pinned `ws`): as root, kubectl's connections to
// 127.0.0.1 (which Go never sends through a proxy) are brought to the guard
// by the cgroup's connect redirect. A `prod` secret delete is Forbidden with
// the guard's Status and the secret stays; the same in `dev` goes through;
// `kubectl exec` is held until approved with `faultctl approvals`; a watch
// streams through the guard as events come. Nothing leaves 127.0.0.1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/files.h"
#include "k8s_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/require_root.h"
#include "selftests/lib/test_bpffs.h"

namespace {

using fltest::ChildProcess;
using fltest::CommandResult;
using namespace std::chrono_literals;

const std::string kDir = K8S_DIR;
const std::string kFaultctl = FAULTCTL_PATH;

using fltest::kubectl_path;

class K8sGate : public ::testing::Test {
 protected:
  void SetUp() override {
    FL_REQUIRE_ROOT("faultctl guard's transparent capture (kubectl never proxies 127.0.0.1)");
    kubectl_ = kubectl_path();
    ASSERT_FALSE(kubectl_.empty()) << "no kubectl: scripts/install-deps.sh installs kubernetes-client";
    ASSERT_TRUE(std::filesystem::exists(kDir + "/node_modules/ws"))
        << "ws is not installed: run scripts/install-deps.sh (npm ci in " << kDir << ")";
    auto folder = faultline::TempFolder::create("fl-k8s-gate");
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    home_.emplace(std::move(*folder));
    server_.emplace(ChildProcess::spawn({"node", kDir + "/apiserver.js"}, {.output = fltest::Output::kFiles}));
    auto line = server_->wait_line_starting("listening ", 10s);
    ASSERT_TRUE(line) << server_->describe();
    port_ = std::stoi(line->substr(10));
    std::ofstream(home() + "/kubeconfig")
        << "apiVersion: v1\nkind: Config\n"
        << "clusters: [{name: standin, cluster: {server: 'http://127.0.0.1:" << port_ << "'}}]\n"
        << "users: [{name: agent, user: {token: standin-token}}]\n"
        << "contexts: [{name: c, context: {cluster: standin, user: agent}}]\n"
        << "current-context: c\n";
    bpffs_ = "/sys/fs/bpf/fl-k8s-gate-" + std::to_string(::getpid());
  }
  void TearDown() override {
    if (server_) server_->stop();
    fltest::remove_test_bpffs_root(bpffs_);
  }

  [[nodiscard]] std::string home() const { return home_->path(); }
  [[nodiscard]] std::string activity() const { return home() + "/activity.jsonl"; }

  [[nodiscard]] std::vector<std::string> env() const {
    return {"HOME=" + home(),
            "KUBECONFIG=" + home() + "/kubeconfig",
            "FAULTLINE_RUN_DIR=" + home() + "/run",
            "FAULTLINE_CA_DIR=" + home() + "/ca",
            "FAULTLINE_STATE_DIR=" + home() + "/state",
            "XDG_RUNTIME_DIR=" + home(),
            "FAULTLINE_BPFFS_ROOT=" + bpffs_,
            "HTTP_PROXY=",
            "HTTPS_PROXY=",
            "http_proxy=",
            "https_proxy=",
            "NO_PROXY=",
            "no_proxy="};
  }

  // faultctl guard (enforcing the two rules) -- kubectl ARGS.
  [[nodiscard]] std::vector<std::string> guarded(const std::vector<std::string>& kubectl_args) const {
    std::vector<std::string> argv = {kFaultctl,
                                     "guard",
                                     "--enforce",
                                     "--terminate-tls",
                                     "--k8s-deny",
                                     "delete secrets -n prod",
                                     "--k8s-approve",
                                     "create pods/exec",
                                     "--json-log",
                                     activity(),
                                     "--",
                                     kubectl_};
    argv.insert(argv.end(), kubectl_args.begin(), kubectl_args.end());
    return argv;
  }

  CommandResult guard(const std::vector<std::string>& kubectl_args) {
    return fltest::run_command(guarded(kubectl_args), {.env = env(), .stop_grace = 5000ms}, 60s);
  }
  // kubectl straight to the stand-in, to see what the server holds.
  CommandResult direct(std::vector<std::string> args) {
    args.insert(args.begin(), kubectl_);
    return fltest::run_command(args, {.env = env()}, 30s);
  }
  CommandResult faultctl(std::vector<std::string> args) {
    args.insert(args.begin(), kFaultctl);
    return fltest::run_command(args, {.env = env()}, 20s);
  }

  std::string kubectl_;
  std::optional<faultline::TempFolder> home_;
  std::optional<ChildProcess> server_;
  int port_ = 0;
  std::string bpffs_;
};

TEST_F(K8sGate, ProdSecretDeleteIsForbiddenWithTheRuleAndTheSecretStaysDevGoesThrough) {
  CommandResult prod = guard({"delete", "secret", "db", "-n", "prod"});
  EXPECT_FALSE(prod.status.is(0)) << prod.describe();
  EXPECT_NE(prod.err.find("Error from server (Forbidden): faultline guard: denied by rule '--k8s-deny delete "
                          "secrets -n prod'"),
            std::string::npos)
      << prod.describe();
  EXPECT_EQ(server_->err().find("DELETE /api/v1/namespaces/prod/secrets/db"), std::string::npos)
      << "the delete reached the server:\n"
      << server_->err();
  CommandResult still = direct({"get", "secret", "db", "-n", "prod", "-o", "name"});
  ASSERT_TRUE(still.status.is(0)) << still.describe();
  EXPECT_EQ(still.out, "secret/db\n");

  CommandResult dev = guard({"delete", "secret", "db", "-n", "dev"});
  ASSERT_TRUE(dev.status.is(0)) << dev.describe() << "\nserver:\n" << server_->err();
  EXPECT_NE(dev.out.find("secret \"db\" deleted"), std::string::npos) << dev.describe();
  CommandResult gone = direct({"get", "secret", "db", "-n", "dev", "-o", "name"});
  EXPECT_FALSE(gone.status.is(0)) << gone.describe();
  EXPECT_NE(gone.err.find("NotFound"), std::string::npos) << gone.describe();

  // The activity log: the denial names the rule.
  bool logged = false;
  std::ifstream in(activity());
  for (std::string l; std::getline(in, l);) {
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_object() && j.value("verdict", "") == "deny" && j.value("rule", "") == "--k8s-deny delete secrets -n prod")
      logged = true;
  }
  EXPECT_TRUE(logged) << "no deny entry naming the rule in " << activity();
}

TEST_F(K8sGate, ExecIsHeldUntilApprovedThenRuns) {
  ChildProcess g = ChildProcess::spawn(guarded({"exec", "web", "-n", "dev", "--", "echo", "approved-run"}),
                                       {.env = env(), .stop_grace = 5000ms});
  ASSERT_TRUE(g.wait_for("held for approval ", 30s, fltest::Stream::kStderr)) << g.describe();
  EXPECT_EQ(server_->err().find("exec dev/web"), std::string::npos) << "exec ran before the approval";
  CommandResult list = faultctl({"approvals", "list", "--json"});
  ASSERT_TRUE(list.status.is(0)) << list.describe();
  auto held = nlohmann::json::parse(list.out, nullptr, false);
  ASSERT_TRUE(held.is_array() && held.size() == 1) << list.out;
  EXPECT_NE(held[0].value("path", "").find("/api/v1/namespaces/dev/pods/web/exec?"), std::string::npos) << list.out;
  EXPECT_EQ(held[0].value("rule", ""), "--k8s-approve create pods/exec") << list.out;
  CommandResult ok = faultctl({"approvals", "approve", held[0]["id"].get<std::string>()});
  ASSERT_TRUE(ok.status.is(0)) << ok.describe();
  CommandResult end = g.finish(30s);
  ASSERT_TRUE(end.status.is(0)) << end.describe() << "\nserver:\n" << server_->err();
  EXPECT_EQ(end.out, "approved-run\n");
  EXPECT_NE(server_->err().find("exec dev/web: echo approved-run"), std::string::npos) << server_->err();
}

TEST_F(K8sGate, AWatchStreamsThroughTheGuardAsEventsCome) {
  ChildProcess g = ChildProcess::spawn(guarded({"get", "secrets", "-n", "dev", "--watch", "-o", "name"}),
                                       {.env = env(), .stop_grace = 5000ms});
  ASSERT_TRUE(g.wait_for("secret/db", 30s)) << g.describe();
  ASSERT_TRUE(server_->wait_for("watch=true", 20s, fltest::Stream::kStderr)) << server_->describe();
  // A secret made behind kubectl's back: its ADDED event must reach kubectl
  // while the watch's response is still open.
  CommandResult made =
      fltest::run_command({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                           "Content-Type: application/json", "-d", R"({"metadata":{"name":"streamed"}})",
                           "http://127.0.0.1:" + std::to_string(port_) + "/api/v1/namespaces/dev/secrets"},
                          {}, 20s);
  ASSERT_EQ(made.out, "201") << made.describe();
  EXPECT_TRUE(g.wait_for("secret/streamed", 20s)) << g.describe();
  EXPECT_TRUE(g.running()) << "the watch ended: " << g.describe();
  g.stop(5000ms);
}

}  // namespace
