// The server side of TLS for HttpServer listeners: an OpenSSL context loaded
// from a PEM certificate chain and key, TLS 1.2 at least.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"

struct ssl_ctx_st;

namespace faultline {

class TlsServerContext {
 public:
  // Refuses a missing or unreadable file, and a key that does not match the certificate.
  [[nodiscard]] static Result<std::shared_ptr<TlsServerContext>> load(const std::string& cert_chain_pem,
                                                                      const std::string& key_pem);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;
  [[nodiscard]] ssl_ctx_st* get() const { return ctx_; }

 private:
  explicit TlsServerContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
};

}  // namespace faultline
