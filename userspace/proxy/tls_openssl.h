// OpenSSL handles as unique_ptrs, and OpenSSL's error queue as one line: for the
// tls_*.cpp files only (the public tls_*.h headers keep OpenSSL out of their
// includers by forward-declaring its types).
#pragma once

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

#include "base/openssl_errors.h"

namespace faultline {

template <typename T, void (*Free)(T*)>
struct OsslFree {
  void operator()(T* p) const { Free(p); }
};
using BioPtr = std::unique_ptr<BIO, OsslFree<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, OsslFree<X509, X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, OsslFree<EVP_PKEY, EVP_PKEY_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, OsslFree<SSL_CTX, SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, OsslFree<SSL, SSL_free>>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, OsslFree<X509_EXTENSION, X509_EXTENSION_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OsslFree<GENERAL_NAMES, GENERAL_NAMES_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OsslFree<BIGNUM, BN_free>>;

// A memory BIO's contents as a string.
[[nodiscard]] inline std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

}  // namespace faultline
