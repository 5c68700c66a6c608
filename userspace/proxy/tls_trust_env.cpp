// The trust bundle and the variables that point runtimes at it.
#include "userspace/proxy/tls_trust_env.h"

#include <sys/stat.h>

#include "base/files.h"
#include "userspace/proxy/tls_openssl.h"

namespace faultline {

Result<std::string> read_system_trust_store() {
  std::vector<std::string> candidates = {X509_get_default_cert_file(), "/etc/ssl/certs/ca-certificates.crt",
                                         "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"};
  std::string tried;
  for (const auto& path : candidates) {
    auto text = read_text_file(path);
    if (text && text->find("-----BEGIN CERTIFICATE-----") != std::string::npos) return text;
    tried += (tried.empty() ? "" : ", ") + path;
  }
  return make_error(ENOENT,
                    "no system trust store found (tried " + tried + "; Debian: apt-get install ca-certificates)");
}

Result<TrustFiles> write_trust_files(const std::string& dir, const std::string& ca_pems) {
  if (ca_pems.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
    return make_error(EINVAL, "no CA certificate to write into the trust files");
  auto system = read_system_trust_store();
  if (!system) return system.error();
  TrustFiles files{dir + "/faultline-ca.pem", dir + "/trust-bundle.pem"};
  std::string bundle = *system;
  if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
  bundle += "# Faultline local CA (TLS termination)\n" + ca_pems;
  FL_TRY(write_file_atomic(files.ca_pem, ca_pems));
  FL_TRY(write_file_atomic(files.bundle, bundle));
  for (const auto& path : {files.ca_pem, files.bundle}) {
    if (::chmod(path.c_str(), 0644) != 0) return errno_error("cannot chmod 644 " + path);
  }
  return files;
}

std::vector<std::pair<std::string, std::string>> trust_environment(const TrustFiles& files) {
  return {
      {"NODE_EXTRA_CA_CERTS", files.ca_pem},
      {"SSL_CERT_FILE", files.bundle},
      {"REQUESTS_CA_BUNDLE", files.bundle},
      {"CURL_CA_BUNDLE", files.bundle},
  };
}

}  // namespace faultline
