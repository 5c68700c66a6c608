// Everything a run with --terminate-tls sets up before its first connection, in
// one call: the CA (created on first use), the leaf cache and both TLS contexts,
// and the trust files and variables for the wrapped command.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/result.h"
#include "userspace/proxy/http_session.h"
#include "userspace/proxy/tls_ca.h"
#include "userspace/proxy/tls_leaf_cache.h"
#include "userspace/proxy/tls_session.h"
#include "userspace/proxy/tls_trust_env.h"

namespace faultline {

struct TerminationOptions {
  CaFiles ca{default_ca_dir()};
  std::string trust_dir;      // where the wrapped command's trust files go (the run's folder)
  TlsClientOptions upstream;  // upstream_ca_file: --upstream-ca
  LeafCacheOptions leaves;
};

struct TerminationSetup {
  std::shared_ptr<TlsServerContext> server;  // for TlsTermination, towards clients
  std::shared_ptr<TlsClientContext> client;  // for TlsTermination, towards upstreams
  CertificateInfo ca;                        // for the run's record and its first lines
  bool ca_created = false;
  TrustFiles trust;
  std::vector<std::pair<std::string, std::string>> env;  // for the wrapped command
};

// Errors name the step: "TLS termination: CA /var/lib/faultline/ca: ...",
// "TLS termination: upstream_ca FILE: ...". Nothing is left half made but the
// CA, which is meant to outlive the run.
[[nodiscard]] Result<TerminationSetup> set_up_termination(const TerminationOptions& options);

// How the HTTP proxies of one run (faultctl run http, the guard's --fault-*)
// meet TLS: by SNI, or with --terminate-tls terminated, the wrapped command's
// trust files in a folder of the run's own that goes with it.
struct RunTls {
  HttpTls http;                                 // for ProxyRegistry::set_http_tls
  std::optional<TempFolder> trust_dir;          // terminate: the trust files' folder
  std::optional<TerminationSetup> termination;  // terminate: the CA and the command's variables
};
// folder_prefix names the trust folder ("faultline-tls"); upstream_ca is --upstream-ca.
[[nodiscard]] Result<RunTls> set_up_run_tls(bool terminate, const std::string& upstream_ca,
                                            const std::string& folder_prefix);

// A proxy's own TLS (faultd's Toxiproxy proxies: listen_tls, upstream_tls,
// docs/proxy.md "TLS"): the contexts `spec` asks for, HttpTlsMode::own, the
// upstream checked for upstream_host (the proxy's upstream without its port).
// A listener without cert and key files mints leaves with the CA in `ca`
// (created on first use, as `faultctl ca init`). Errors name the member, and
// are bad input when the request is wrong (a system's refusal, a CA folder
// that cannot be made, is not): "listen_tls: cert FILE: not a readable PEM certificate chain",
// "upstream_tls: upstream_ca FILE: ...", "upstream_ca: needs upstream_tls".
[[nodiscard]] Result<HttpTls> set_up_proxy_tls(const ProxyTlsSpec& spec, const std::string& upstream_host,
                                               const CaFiles& ca = CaFiles{default_ca_dir()});

}  // namespace faultline
