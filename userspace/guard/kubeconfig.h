// The guard's --k8s-kubeconfig FILE: the user's kubeconfig read (one context:
// its current one, or --k8s-context), what the guard needs to reach the API
// server as that user (the server, how to verify it, the user's bearer token
// or basic credentials and client certificate), and the copy the command gets
// instead: the same server and context, the guard's CA as its
// certificate-authority-data, a user with no credentials at all. Parsing only,
// no I/O but reading the files the kubeconfig names.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "userspace/guard/creds_file.h"
#include "userspace/proxy/tls_session.h"

namespace faultline {

struct KubeconfigUse {
  std::string file;     // as given
  std::string context;  // the context used
  std::string cluster_name;
  std::string user_name;       // "" when the context names none
  std::string namespace_name;  // the context's namespace, "" for none
  std::string server;          // as written: "https://host:port[/path]"
  std::string host;            // lowercase; an IPv6 literal without brackets
  uint16_t port = 443;
  std::string tls_server_name;  // the cluster's tls-server-name, "" for none
  // How the guard verifies the server: the kubeconfig's own roots
  // (certificate-authority or -data, PEM; empty: the system store), or not at
  // all (insecure-skip-tls-verify: true).
  std::string ca_pem;
  bool insecure = false;
  // The Authorization header the guard sets (token, tokenFile, username and
  // password), none when the user has neither.
  std::optional<HttpCredential> authorization;
  // The client certificate chain and key the guard presents upstream (PEM,
  // both or neither).
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string client_cert_origin;  // "client-certificate /path" or "client-certificate-data", for lines
};

// The kubeconfig's text (YAML or JSON). `origin` starts every error and names
// the file ("FILE: users[agent].user.exec: ..."); `dir` is where relative
// paths in it (certificate-authority, client-certificate, client-key,
// tokenFile) are from; `context` picks one (empty: current-context). Errors
// are bad input naming the field; an exec or auth-provider user is refused.
[[nodiscard]] Result<KubeconfigUse> parse_kubeconfig(std::string_view text, const std::string& origin,
                                                     const std::string& dir, const std::string& context);
// The file at `path` (at most 1 MiB), parsed; errors start with the path.
[[nodiscard]] Result<KubeconfigUse> read_kubeconfig(const std::string& path, const std::string& context);

// The user's token in the command's copy when the guard holds credentials
// (kubectl would otherwise prompt for a username): no secret, replaced by the
// guard's Authorization on the way out.
inline constexpr std::string_view kChildStandInToken = "faultline-guard-holds-the-credentials";

// The command's copy (JSON, which kubectl and client-go read as YAML): one
// cluster (the server, tls-server-name, `guard_ca_pem` as its
// certificate-authority-data), one user with no credentials (only
// kChildStandInToken when the guard holds some), one context (its namespace
// kept), current-context set to it.
[[nodiscard]] std::string child_kubeconfig(const KubeconfigUse& use, std::string_view guard_ca_pem);

// The guard's TLS towards the server: the kubeconfig's roots alone (or the
// system's when it names none, or no check with insecure-skip-tls-verify),
// the user's client certificate.
[[nodiscard]] TlsClientOptions kubeconfig_upstream_tls(const KubeconfigUse& use);
// That context made, an error naming the kubeconfig's field when a PEM in it
// is not what it must be (the key not the certificate's, ...).
[[nodiscard]] Result<std::shared_ptr<TlsClientContext>> kubeconfig_upstream_client(const KubeconfigUse& use);

// What the guard holds for the server, for its first line: "a bearer token,
// a client certificate (client-certificate-data)", or "no credentials".
[[nodiscard]] std::string kubeconfig_credentials_text(const KubeconfigUse& use);

}  // namespace faultline
