// The order matters only for errors: a bad --upstream-ca is reported before any
// file is written for the wrapped command.
#include "userspace/proxy/tls_setup.h"

namespace faultline {
namespace {

Error termination_error(const Error& e, const std::string& step) {
  Error out = e;
  out.message = "TLS termination: " + step + e.message;
  return out;
}

}  // namespace

Result<TerminationSetup> set_up_termination(const TerminationOptions& options) {
  if (options.trust_dir.empty())
    return input_error(EINVAL, "TLS termination: no folder for the wrapped command's trust files");
  auto client = TlsClientContext::create(options.upstream);
  if (!client) return termination_error(client.error(), "");
  auto opened = open_or_create_ca(options.ca);
  if (!opened) return termination_error(opened.error(), "CA " + options.ca.dir + ": ");
  TerminationSetup setup;
  setup.ca = opened->ca.info();
  setup.ca_created = opened->created;
  auto ca = std::make_shared<CertificateAuthority>(std::move(opened->ca));
  auto server = TlsServerContext::create(std::make_shared<LeafCache>(ca, options.leaves));
  if (!server) return termination_error(server.error(), "");
  auto pems = ca_certificates_to_trust(options.ca);
  if (!pems) return termination_error(pems.error(), "CA " + options.ca.dir + ": ");
  auto trust = write_trust_files(options.trust_dir, *pems);
  if (!trust) return termination_error(trust.error(), "trust files: ");
  setup.server = std::move(*server);
  setup.client = std::move(*client);
  setup.trust = *trust;
  setup.env = trust_environment(*trust);
  return setup;
}

Result<RunTls> set_up_run_tls(bool terminate, const std::string& upstream_ca, const std::string& folder_prefix) {
  RunTls tls;
  tls.http.mode = HttpTlsMode::sni;
  if (!terminate) return tls;
  auto folder = TempFolder::create(folder_prefix);
  if (!folder) return folder.error();
  tls.trust_dir.emplace(std::move(*folder));
  TerminationOptions options;
  options.trust_dir = tls.trust_dir->path();
  options.upstream.upstream_ca_file = upstream_ca;
  auto setup = set_up_termination(options);
  if (!setup) return setup.error();
  tls.http.mode = HttpTlsMode::terminate;
  tls.http.server = setup->server;
  tls.http.client = setup->client;
  tls.termination.emplace(std::move(*setup));
  return tls;
}

Result<HttpTls> set_up_proxy_tls(const ProxyTlsSpec& spec, const std::string& upstream_host, const CaFiles& ca) {
  auto prefixed = [](const Error& e, const std::string& step) {
    Error out = e;
    out.message = step + e.message;
    return out;
  };
  if (!spec.upstream) {
    for (const auto& [member, value] : {std::pair<const char*, const std::string&>{"upstream_ca", spec.upstream_ca},
                                        {"client_cert", spec.client_cert},
                                        {"client_key", spec.client_key}})
      if (!value.empty()) return input_error(EINVAL, std::string(member) + ": needs \"upstream_tls\": true");
  }
  if (!spec.listen && (!spec.cert.empty() || !spec.key.empty()))
    return input_error(EINVAL, "listen_tls: cert and key without listening with TLS");
  if (spec.cert.empty() != spec.key.empty()) return input_error(EINVAL, "listen_tls: give cert and key together");
  HttpTls tls;
  tls.mode = HttpTlsMode::own;
  tls.spec = spec;
  tls.upstream_name = upstream_host;
  if (spec.upstream) {
    TlsClientOptions o{spec.upstream_ca, spec.client_cert, spec.client_key};
    auto client = TlsClientContext::create(o);
    if (!client) return prefixed(client.error(), "upstream_tls: ");
    tls.client = std::move(*client);
  }
  if (spec.listen && !spec.cert.empty()) {
    auto server = TlsServerContext::create_with_certificate(spec.cert, spec.key);
    if (!server) return prefixed(server.error(), "listen_tls: ");
    tls.server = std::move(*server);
  } else if (spec.listen) {
    auto opened = open_or_create_ca(ca);
    if (!opened) return prefixed(opened.error(), "listen_tls: CA " + ca.dir + ": ");
    auto authority = std::make_shared<CertificateAuthority>(std::move(opened->ca));
    auto server = TlsServerContext::create(std::make_shared<LeafCache>(authority, LeafCacheOptions{}));
    if (!server) return prefixed(server.error(), "listen_tls: ");
    tls.server = std::move(*server);
  }
  return tls;
}

}  // namespace faultline
