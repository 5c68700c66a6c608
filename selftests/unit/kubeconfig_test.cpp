// --k8s-kubeconfig's reading (userspace/guard/kubeconfig.h): the context, its
// cluster and user, each credential kind, each refusal naming its field, and
// the command's copy holding the guard's CA and no credentials.
#include "userspace/guard/kubeconfig.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace faultline {
namespace {

const std::string kKcPemCa = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const std::string kKcPemKey = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

std::string kc_b64(const std::string& s) {
  static constexpr char kA[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t v = uint8_t(s[i]) << 16;
    if (i + 1 < s.size()) v |= uint8_t(s[i + 1]) << 8;
    if (i + 2 < s.size()) v |= uint8_t(s[i + 2]);
    out.push_back(kA[(v >> 18) & 63]);
    out.push_back(kA[(v >> 12) & 63]);
    out.push_back(i + 1 < s.size() ? kA[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < s.size() ? kA[v & 63] : '=');
  }
  return out;
}

std::string kc_config(const std::string& cluster, const std::string& user, const std::string& extra = "") {
  return "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster: " + cluster +
         "\nusers:\n- name: agent\n  user: " + user +
         "\ncontexts:\n- name: main\n  context: {cluster: prod, user: agent, namespace: team}\n"
         "- name: other\n  context: {cluster: prod, user: nobody}\ncurrent-context: main\n" +
         extra;
}

Result<KubeconfigUse> kc_parse(const std::string& text, const std::string& context = "") {
  return parse_kubeconfig(text, "kc.yaml", "/etc/kube", context);
}

std::string kc_error_of(const std::string& text, const std::string& context = "") {
  auto r = kc_parse(text, context);
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_TRUE(r.error().bad_input);
  return r.error().message;
}

TEST(Kubeconfig, ATokenUserIsTheGuardsBearerHeaderForTheServer) {
  auto k = kc_parse(
      kc_config("{server: 'https://API.Example:6443/base', certificate-authority-data: " + kc_b64(kKcPemCa) + "}",
                "{token: abc.def}"));
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ(k->context, "main");
  EXPECT_EQ(k->cluster_name, "prod");
  EXPECT_EQ(k->user_name, "agent");
  EXPECT_EQ(k->namespace_name, "team");
  EXPECT_EQ(k->host, "api.example");
  EXPECT_EQ(k->port, 6443);
  EXPECT_EQ(k->ca_pem, kKcPemCa);
  EXPECT_FALSE(k->insecure);
  ASSERT_TRUE(k->authorization);
  EXPECT_EQ(k->authorization->host, "api.example");
  EXPECT_EQ(k->authorization->port, 6443);
  EXPECT_EQ(k->authorization->header, "Authorization");
  EXPECT_EQ(expand_secret(k->authorization->value, k->authorization->secret.ref), "Bearer abc.def");
  EXPECT_EQ(k->authorization->secret.kind, SecretKind::literal);
  EXPECT_EQ(kubeconfig_credentials_text(*k), "a bearer token");
}

TEST(Kubeconfig, ATokenFileIsReadAgainAsAFileSecretRelativeToTheKubeconfig) {
  auto k = kc_parse(kc_config("{server: 'https://[::1]', insecure-skip-tls-verify: true}", "{tokenFile: token.txt}"));
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ(k->host, "::1");
  EXPECT_EQ(k->port, 443);
  EXPECT_TRUE(k->insecure);
  ASSERT_TRUE(k->authorization);
  EXPECT_EQ(k->authorization->secret.kind, SecretKind::file);
  EXPECT_EQ(k->authorization->secret.ref, "/etc/kube/token.txt");
}

TEST(Kubeconfig, UsernameAndPasswordAreBasicCredentials) {
  auto k = kc_parse(kc_config("{server: 'https://h'}", "{username: admin, password: s3cret}"));
  ASSERT_TRUE(k.ok()) << k.error().message;
  ASSERT_TRUE(k->authorization);
  EXPECT_EQ(expand_secret(k->authorization->value, k->authorization->secret.ref), "Basic " + kc_b64("admin:s3cret"));
}

TEST(Kubeconfig, AClientCertificateIsKeptInMemoryFromItsData) {
  auto k = kc_parse(kc_config("{server: 'https://h'}", "{client-certificate-data: " + kc_b64(kKcPemCa) +
                                                           ", client-key-data: " + kc_b64(kKcPemKey) + "}"));
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_FALSE(k->authorization);
  EXPECT_EQ(k->client_cert_pem, kKcPemCa);
  EXPECT_EQ(k->client_key_pem, kKcPemKey);
  EXPECT_EQ(kubeconfig_credentials_text(*k), "a client certificate (client-certificate-data)");
}

TEST(Kubeconfig, TheContextFlagPicksAnotherContext) {
  EXPECT_EQ(kc_error_of(kc_config("{server: 'https://h'}", "{}"), "other"),
            "kc.yaml: contexts[other].context.user: no entry named 'nobody' in users");
  EXPECT_EQ(kc_error_of(kc_config("{server: 'https://h'}", "{}"), "gone"),
            "kc.yaml: --k8s-context: no entry named 'gone' in contexts");
}

TEST(Kubeconfig, EachRefusalNamesItsField) {
  const std::string ok_cluster = "{server: 'https://h'}";
  EXPECT_EQ(kc_error_of(kc_config(ok_cluster, "{exec: {command: aws}}"))
                .rfind("kc.yaml: users[agent].user.exec: an exec credential plugin is not supported", 0),
            0u);
  EXPECT_EQ(kc_error_of(kc_config(ok_cluster, "{auth-provider: {name: gcp}}"))
                .rfind("kc.yaml: users[agent].user.auth-provider: an auth-provider is not supported", 0),
            0u);
  EXPECT_EQ(kc_error_of(kc_config("{server: 'http://h:8080'}", "{}"))
                .rfind("kc.yaml: clusters[prod].cluster.server: 'http://h:8080': a plain http:// server", 0),
            0u);
  EXPECT_EQ(kc_error_of(kc_config("{server: 'https://h:0'}", "{}")),
            "kc.yaml: clusters[prod].cluster.server: 'https://h:0': the port is not 1 to 65535");
  EXPECT_EQ(kc_error_of(kc_config("{}", "{}")), "kc.yaml: clusters[prod].cluster.server: missing");
  EXPECT_EQ(kc_error_of(kc_config("{server: 'https://h', proxy-url: 'http://p:3128'}", "{}"))
                .rfind("kc.yaml: clusters[prod].cluster.proxy-url: not supported", 0),
            0u);
  EXPECT_EQ(kc_error_of(kc_config("{server: 'https://h', certificate-authority-data: '!!'}", "{}")),
            "kc.yaml: clusters[prod].cluster.certificate-authority-data: not base64 of a PEM text");
  EXPECT_EQ(kc_error_of(kc_config("{server: 'https://h', certificate-authority: ca.pem, certificate-authority-data: " +
                                      kc_b64(kKcPemCa) + "}",
                                  "{}"))
                .rfind("kc.yaml: clusters[prod].cluster.certificate-authority: given twice", 0),
            0u);
  EXPECT_EQ(kc_error_of(kc_config("{server: 'https://h', certificate-authority: /nonexistent/ca.pem}", "{}")),
            "kc.yaml: clusters[prod].cluster.certificate-authority: cannot read /nonexistent/ca.pem: No such file or "
            "directory");
  EXPECT_EQ(kc_error_of(kc_config("{server: 'https://h', insecure-skip-tls-verify: maybe}", "{}")),
            "kc.yaml: clusters[prod].cluster.insecure-skip-tls-verify: not true or false");
  EXPECT_EQ(kc_error_of(kc_config(ok_cluster, "{client-certificate-data: " + kc_b64(kKcPemCa) + "}"))
                .rfind("kc.yaml: users[agent].user.client-key: missing", 0),
            0u);
  EXPECT_EQ(kc_error_of(kc_config(ok_cluster, "{client-certificate-data: " + kc_b64(kKcPemCa) +
                                                  ", client-key-data: " + kc_b64("nokey") + "}")),
            "kc.yaml: users[agent].user.client-key: holds no PEM private key");
  EXPECT_EQ(kc_error_of(kc_config(ok_cluster, "{token: t, username: u}"))
                .rfind("kc.yaml: users[agent].user.username: with a token too", 0),
            0u);
  EXPECT_EQ(kc_error_of(kc_config(ok_cluster, "{token: [a]}")), "kc.yaml: users[agent].user.token: not a string");
  EXPECT_EQ(kc_error_of("current-context: ''\n"),
            "kc.yaml: current-context: missing (name the context with --k8s-context)");
  EXPECT_EQ(kc_error_of("[1, 2]"), "kc.yaml: not a kubeconfig (a map with clusters, users, contexts)");
  EXPECT_EQ(kc_error_of("a: [").rfind("kc.yaml: not YAML: ", 0), 0u);
}

TEST(Kubeconfig, TheCommandsCopyTrustsTheGuardsCaAndHoldsNoCredential) {
  auto k = kc_parse(kc_config(
      "{server: 'https://h:6443', tls-server-name: api.internal, certificate-authority-data: " + kc_b64(kKcPemCa) + "}",
      "{token: the-token, client-certificate-data: " + kc_b64(kKcPemCa) + ", client-key-data: " + kc_b64(kKcPemKey) +
          "}"));
  ASSERT_TRUE(k.ok()) << k.error().message;
  const std::string guard_ca = "-----BEGIN CERTIFICATE-----\nGUARD\n-----END CERTIFICATE-----\n";
  const std::string copy = child_kubeconfig(*k, guard_ca);
  EXPECT_EQ(copy.find("the-token"), std::string::npos) << copy;
  EXPECT_EQ(copy.find(kc_b64(kKcPemKey)), std::string::npos) << copy;
  auto j = nlohmann::json::parse(copy);
  EXPECT_EQ(j["current-context"], "main");
  EXPECT_EQ(j["clusters"][0]["cluster"]["server"], "https://h:6443");
  EXPECT_EQ(j["clusters"][0]["cluster"]["tls-server-name"], "api.internal");
  EXPECT_EQ(j["clusters"][0]["cluster"]["certificate-authority-data"], kc_b64(guard_ca));
  EXPECT_EQ(j["users"][0]["name"], "agent");
  EXPECT_EQ(j["users"][0]["user"], nlohmann::json({{"token", std::string(kChildStandInToken)}}));
  auto bare = kc_parse(kc_config("{server: 'https://h'}", "{}"));
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  EXPECT_TRUE(nlohmann::json::parse(child_kubeconfig(*bare, guard_ca))["users"][0]["user"].empty());
  EXPECT_EQ(j["contexts"][0]["context"]["namespace"], "team");
  EXPECT_EQ(j["contexts"][0]["context"]["user"], "agent");
}

}  // namespace
}  // namespace faultline
