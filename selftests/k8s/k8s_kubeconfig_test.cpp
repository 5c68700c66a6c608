// `faultctl guard --k8s-kubeconfig FILE` with real kubectl against the stand-in
// API server over HTTPS (apiserver.js with STANDIN_TLS_*): the server requires a
// bearer token (first test) or a client certificate (second); the user's
// kubeconfig holds it, the command gets a copy that trusts the guard's CA and
// holds nothing secret, and the guard presents the credential upstream. The
// requests succeed, the Kubernetes deny rule still acts, and the secret is in
// neither the copy, the guard's output nor its activity log. As root (kubectl
// never proxies 127.0.0.1: the guard's transparent capture takes it). Nothing
// leaves 127.0.0.1.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/files.h"
#include "k8s_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/require_root.h"
#include "selftests/lib/test_bpffs.h"
#include "selftests/lib/test_cert.h"

namespace k8s_kcfg_test {

using fltest::ChildProcess;
using fltest::CommandResult;
using namespace std::chrono_literals;

const std::string kKcfgDir = K8S_DIR;
const std::string kKcfgFaultctl = FAULTCTL_PATH;

std::string kcfg_slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string kcfg_base64(const std::string& bytes) {
  std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

class K8sKubeconfig : public ::testing::Test {
 protected:
  void SetUp() override {
    FL_REQUIRE_ROOT("faultctl guard's transparent capture (kubectl never proxies 127.0.0.1)");
    kubectl_ = fltest::kubectl_path();
    ASSERT_FALSE(kubectl_.empty()) << "no kubectl: scripts/install-deps.sh installs kubernetes-client";
    ASSERT_TRUE(std::filesystem::exists(kKcfgDir + "/node_modules/ws"))
        << "ws is not installed: run scripts/install-deps.sh (npm ci in " << kKcfgDir << ")";
    auto folder = faultline::TempFolder::create("fl-k8s-kcfg");
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    home_.emplace(std::move(*folder));
    CommandResult made = fltest::make_self_signed_cert(file("server.pem"), file("server.key"), "standin");
    ASSERT_TRUE(made.status.is(0)) << made.describe();
    bpffs_ = "/sys/fs/bpf/fl-k8s-kcfg-" + std::to_string(::getpid());
    std::mt19937_64 rng(std::random_device{}());
    secret_ = "kcfg-token-" + std::to_string(rng());
  }
  void TearDown() override {
    if (server_) server_->stop();
    fltest::remove_test_bpffs_root(bpffs_);
  }

  [[nodiscard]] std::string file(const std::string& name) const { return home_->path() + "/" + name; }

  void start_server(const std::vector<std::string>& env) {
    std::vector<std::string> e = {"STANDIN_TLS_CERT=" + file("server.pem"), "STANDIN_TLS_KEY=" + file("server.key")};
    e.insert(e.end(), env.begin(), env.end());
    server_.emplace(
        ChildProcess::spawn({"node", kKcfgDir + "/apiserver.js"}, {.env = e, .output = fltest::Output::kFiles}));
    auto line = server_->wait_line_starting("listening ", 10s);
    ASSERT_TRUE(line) << server_->describe();
    port_ = std::stoi(line->substr(10));
  }

  // A kubeconfig for the stand-in with this cluster CA field and user body.
  void write_kubeconfig(const std::string& name, const std::string& ca_field, const std::string& user) const {
    std::ofstream(file(name)) << "apiVersion: v1\nkind: Config\n"
                              << "clusters:\n- name: standin\n  cluster:\n    server: https://127.0.0.1:" << port_
                              << "\n    " << ca_field << "\n"
                              << "users:\n- name: agent\n  user: " << user << "\n"
                              << "contexts:\n- name: c\n  context: {cluster: standin, user: agent}\n"
                              << "current-context: c\n";
  }

  [[nodiscard]] std::vector<std::string> env() const {
    return {"HOME=" + home_->path(),
            "KUBECONFIG=" + file("user-kubeconfig"),  // the guard gives the command its copy instead
            "FAULTLINE_RUN_DIR=" + file("run"),
            "FAULTLINE_CA_DIR=" + file("ca"),
            "FAULTLINE_STATE_DIR=" + file("state"),
            "XDG_RUNTIME_DIR=" + home_->path(),
            "FAULTLINE_BPFFS_ROOT=" + bpffs_,
            "HTTP_PROXY=",
            "HTTPS_PROXY=",
            "http_proxy=",
            "https_proxy=",
            "NO_PROXY=",
            "no_proxy="};
  }

  // faultctl guard --k8s-kubeconfig user-kubeconfig -- sh -c 'keep the copy; kubectl ARGS'.
  CommandResult guard(const std::vector<std::string>& kubectl_args) {
    std::string script = "cp \"$KUBECONFIG\" " + file("child-kubeconfig") + " && exec " + kubectl_;
    for (const std::string& a : kubectl_args) script += " '" + a + "'";
    const std::vector<std::string> argv = {kKcfgFaultctl,
                                           "guard",
                                           "--enforce",
                                           "--k8s-kubeconfig",
                                           file("user-kubeconfig"),
                                           "--k8s-deny",
                                           "delete secrets -n prod",
                                           "--json-log",
                                           file("activity.jsonl"),
                                           "--",
                                           "sh",
                                           "-c",
                                           script};
    CommandResult r = fltest::run_command(argv, {.env = env(), .stop_grace = 5000ms}, 60s);
    guard_output_ += r.out + r.err;
    return r;
  }
  CommandResult direct(const std::string& kubeconfig, std::vector<std::string> args) {
    args.insert(args.begin(), {kubectl_, "--kubeconfig", file(kubeconfig)});
    return fltest::run_command(args, {.env = env()}, 30s);
  }

  // A line of the stand-in's log starting with `request` also holds `mark`.
  [[nodiscard]] bool server_saw(const std::string& request, const std::string& mark) {
    std::istringstream in(server_->err());
    for (std::string l; std::getline(in, l);)
      if (l.rfind(request, 0) == 0 && l.find(mark) != std::string::npos) return true;
    return false;
  }

  // The requests through the guard: reads, the deny rule, a delete that goes.
  void expect_requests_work_and_rule_acts(const std::string& auth_mark) {
    CommandResult get = guard({"get", "secret", "db", "-n", "dev", "-o", "name"});
    ASSERT_TRUE(get.status.is(0)) << get.describe() << "\nserver:\n" << server_->err();
    EXPECT_EQ(get.out, "secret/db\n");
    EXPECT_TRUE(server_saw("GET /api/v1/namespaces/dev/secrets/db ", auth_mark)) << server_->err();

    CommandResult prod = guard({"delete", "secret", "db", "-n", "prod"});
    EXPECT_FALSE(prod.status.is(0)) << prod.describe();
    EXPECT_NE(prod.err.find("Error from server (Forbidden): faultline guard: denied by rule '--k8s-deny delete "
                            "secrets -n prod'"),
              std::string::npos)
        << prod.describe();
    EXPECT_EQ(server_->err().find("DELETE /api/v1/namespaces/prod/secrets/db"), std::string::npos)
        << "the delete reached the server:\n"
        << server_->err();

    CommandResult dev = guard({"delete", "secret", "db", "-n", "dev"});
    ASSERT_TRUE(dev.status.is(0)) << dev.describe() << "\nserver:\n" << server_->err();
    EXPECT_NE(dev.out.find("secret \"db\" deleted"), std::string::npos) << dev.describe();
    EXPECT_TRUE(server_saw("DELETE /api/v1/namespaces/dev/secrets/db ", auth_mark)) << server_->err();
  }

  // The command's copy: the guard's CA, a user with nothing in it, none of `secrets`.
  void expect_copy_holds_no_secret(const std::vector<std::string>& secrets) {
    const std::string copy = kcfg_slurp(file("child-kubeconfig"));
    ASSERT_FALSE(copy.empty()) << "the command's KUBECONFIG was not copied";
    auto j = nlohmann::json::parse(copy, nullptr, false);
    ASSERT_TRUE(j.is_object()) << copy;
    ASSERT_EQ(j["users"].size(), 1u) << copy;
    // Nothing but the stand-in token that keeps kubectl from prompting for a username.
    EXPECT_EQ(j["users"][0]["user"], nlohmann::json({{"token", "faultline-guard-holds-the-credentials"}})) << copy;
    EXPECT_EQ(j["clusters"][0]["cluster"].value("server", ""), "https://127.0.0.1:" + std::to_string(port_)) << copy;
    EXPECT_EQ(j["clusters"][0]["cluster"].value("certificate-authority-data", ""),
              kcfg_base64(kcfg_slurp(file("ca/ca.pem"))))
        << "the copy does not trust the guard's CA:\n"
        << copy;
    const std::string activity = kcfg_slurp(file("activity.jsonl"));
    EXPECT_FALSE(activity.empty());
    for (const std::string& s : secrets) {
      EXPECT_EQ(copy.find(s), std::string::npos) << "the copy holds a secret:\n" << copy;
      EXPECT_EQ(guard_output_.find(s), std::string::npos) << "the guard's output holds a secret";
      EXPECT_EQ(activity.find(s), std::string::npos) << "the activity log holds a secret";
    }
  }

  std::string kubectl_;
  std::optional<faultline::TempFolder> home_;
  std::optional<ChildProcess> server_;
  int port_ = 0;
  std::string bpffs_;
  std::string secret_;
  std::string guard_output_;
};

TEST_F(K8sKubeconfig, BearerTokenIsTheGuardsTheCommandsCopyHoldsNone) {
  start_server({"STANDIN_TOKEN=" + secret_});
  write_kubeconfig("user-kubeconfig", "certificate-authority: " + file("server.pem"), "{token: " + secret_ + "}");
  write_kubeconfig("no-token", "certificate-authority: " + file("server.pem"), "{token: not-the-token}");
  // The stand-in does require the token: with another one kubectl is refused.
  CommandResult bare = direct("no-token", {"get", "secret", "db", "-n", "dev", "-o", "name"});
  EXPECT_FALSE(bare.status.is(0)) << bare.describe();
  EXPECT_NE(bare.err.find("You must be logged in to the server"), std::string::npos) << bare.describe();

  expect_requests_work_and_rule_acts("auth=ok");
  expect_copy_holds_no_secret({secret_});
  EXPECT_NE(guard_output_.find("the guard presents a bearer token to https://127.0.0.1:"), std::string::npos)
      << guard_output_;
}

TEST_F(K8sKubeconfig, ATokenFileBesideTheKubeconfigIsReadByTheGuard) {
  start_server({"STANDIN_TOKEN=" + secret_});
  std::ofstream(file("token")) << secret_ << "\n";
  write_kubeconfig("user-kubeconfig", "certificate-authority: server.pem", "{tokenFile: token}");  // relative paths
  CommandResult get = guard({"get", "secret", "db", "-n", "dev", "-o", "name"});
  ASSERT_TRUE(get.status.is(0)) << get.describe() << "\nserver:\n" << server_->err();
  EXPECT_EQ(get.out, "secret/db\n");
  EXPECT_TRUE(server_saw("GET /api/v1/namespaces/dev/secrets/db ", "auth=ok")) << server_->err();
  EXPECT_NE(guard_output_.find("a bearer token (tokenFile " + file("token") + ")"), std::string::npos) << guard_output_;
  expect_copy_holds_no_secret({secret_});
}

TEST_F(K8sKubeconfig, ClientCertificateIsPresentedByTheGuardTheCommandsCopyHoldsNoKey) {
  CommandResult made = fltest::make_self_signed_cert(file("client.pem"), file("client.key"), "agent");
  ASSERT_TRUE(made.status.is(0)) << made.describe();
  start_server({"STANDIN_CLIENT_CA=" + file("client.pem")});
  const std::string key_pem = kcfg_slurp(file("client.key"));
  const std::string key_data = kcfg_base64(key_pem);
  write_kubeconfig("user-kubeconfig", "certificate-authority-data: " + kcfg_base64(kcfg_slurp(file("server.pem"))),
                   "{client-certificate-data: " + kcfg_base64(kcfg_slurp(file("client.pem"))) +
                       ", client-key-data: " + key_data + "}");
  write_kubeconfig("no-cert", "certificate-authority: " + file("server.pem"), "{}");
  // The stand-in does require the certificate: without it the handshake fails.
  CommandResult bare = direct("no-cert", {"get", "secret", "db", "-n", "dev", "-o", "name"});
  EXPECT_FALSE(bare.status.is(0)) << bare.describe();
  EXPECT_EQ(server_->err().find("GET /api/v1/namespaces/dev/secrets/db"), std::string::npos) << server_->err();

  expect_requests_work_and_rule_acts("client=agent");
  // The key's base64 lines, and its PEM body's, are nowhere the command or the logs show.
  std::vector<std::string> secrets = {key_data.substr(0, 40), "PRIVATE KEY"};
  const size_t body = key_pem.find("-----\n");
  ASSERT_NE(body, std::string::npos);
  secrets.push_back(key_pem.substr(body + 6, 40));
  expect_copy_holds_no_secret(secrets);
}

TEST_F(K8sKubeconfig, AnExecUserIsRefusedNamingTheFileAndTheField) {
  port_ = 6443;
  write_kubeconfig("user-kubeconfig", "certificate-authority: " + file("server.pem"),
                   "{exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}}");
  CommandResult r = fltest::run_command(
      {kKcfgFaultctl, "guard", "--k8s-kubeconfig", file("user-kubeconfig"), "--", "true"}, {.env = env()}, 30s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--k8s-kubeconfig " + file("user-kubeconfig") +
                       ": users[agent].user.exec: an exec credential "
                       "plugin is not supported"),
            std::string::npos)
      << r.describe();
}

}  // namespace k8s_kcfg_test
