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

}  // namespace faultline
