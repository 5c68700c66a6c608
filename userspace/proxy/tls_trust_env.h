// What a command wrapped under TLS termination needs to trust the local CA: a
// bundle of the system's roots plus ours, and the variables its runtime reads.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace faultline {

// The system's trust store as one PEM text: OpenSSL's default file
// (X509_get_default_cert_file(): /usr/lib/ssl/cert.pem on Debian, a link to
// /etc/ssl/certs/ca-certificates.crt), else the usual bundle paths of other
// distributions. SSL_CERT_FILE in our own environment is ignored on purpose:
// it may be a bundle a parent guard wrote.
[[nodiscard]] Result<std::string> read_system_trust_store();

// The files a wrapped command is pointed at.
struct TrustFiles {
  std::string ca_pem;  // our CA certificates alone (current, and previous after a rotation)
  std::string bundle;  // the system store followed by ours
};

// Writes DIR/faultline-ca.pem and DIR/trust-bundle.pem (mode 0644: the wrapped
// command may run as another user), each replaced atomically. ca_pems: the
// CA certificates to trust (PEM, one or more).
[[nodiscard]] Result<TrustFiles> write_trust_files(const std::string& dir, const std::string& ca_pems);

// The variables, as NAME/VALUE pairs, in the order they are documented:
//   NODE_EXTRA_CA_CERTS  Node.js: added to its built-in roots -> ca_pem
//   SSL_CERT_FILE        OpenSSL (python ssl/urllib, ruby, curl with OpenSSL,
//                        Go's crypto/x509 on Linux): replaces the store -> bundle
//   REQUESTS_CA_BUNDLE   python requests (certifi otherwise) -> bundle
//   CURL_CA_BUNDLE       curl -> bundle
// SSL_CERT_FILE replaces the system store for whoever reads it, which is why it
// names the bundle (system + ours) and never our CA alone.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> trust_environment(const TrustFiles& files);

}  // namespace faultline
