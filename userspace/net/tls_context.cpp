// Loading a server certificate and key into an SSL_CTX.
#include "userspace/net/tls_context.h"

#include <openssl/ssl.h>

#include "base/openssl_errors.h"

namespace faultline {

Result<std::shared_ptr<HttpTlsContext>> HttpTlsContext::load(const std::string& cert_chain_pem,
                                                             const std::string& key_pem) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return make_error(0, with_openssl_errors("SSL_CTX_new"));
  std::shared_ptr<HttpTlsContext> owner(new HttpTlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // The server's write buffer is a std::string that grows between retries.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_chain_pem.c_str()) != 1)
    return input_error(0, with_openssl_errors("TLS certificate " + cert_chain_pem));
  if (SSL_CTX_use_PrivateKey_file(ctx, key_pem.c_str(), SSL_FILETYPE_PEM) != 1)
    return input_error(0, with_openssl_errors("TLS key " + key_pem));
  if (SSL_CTX_check_private_key(ctx) != 1)
    return input_error(0, "TLS key " + key_pem + " does not match the certificate " + cert_chain_pem);
  return owner;
}

HttpTlsContext::~HttpTlsContext() { SSL_CTX_free(ctx_); }

}  // namespace faultline
