// The server side of TLS for HttpServer listeners: an OpenSSL context loaded
// from a PEM certificate chain and key, TLS 1.2 at least.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"

struct ssl_ctx_st;

namespace faultline {

class HttpTlsContext {
 public:
  // Refuses a missing or unreadable file, and a key that does not match the certificate.
  [[nodiscard]] static Result<std::shared_ptr<HttpTlsContext>> load(const std::string& cert_chain_pem,
                                                                    const std::string& key_pem);
  ~HttpTlsContext();
  HttpTlsContext(const HttpTlsContext&) = delete;
  HttpTlsContext& operator=(const HttpTlsContext&) = delete;
  [[nodiscard]] ssl_ctx_st* get() const { return ctx_; }

 private:
  explicit HttpTlsContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
};

}  // namespace faultline
