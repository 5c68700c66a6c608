// TlsSession over two memory BIOs: rbio holds what the peer sent, wbio what we
// must send. Every call runs OpenSSL until it wants more input, so the relay's
// only duties are to feed reads in and write take_ciphertext() out.
#include "userspace/proxy/tls_session.h"

#include <arpa/inet.h>

#include "userspace/proxy/tls_openssl.h"

namespace faultline {
namespace {

// ALPN wire format of the one protocol termination speaks.
constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

bool tls_is_ip_literal(const std::string& host) {
  unsigned char addr[16];
  return ::inet_pton(AF_INET, host.c_str(), addr) == 1 || ::inet_pton(AF_INET6, host.c_str(), addr) == 1;
}

TlsSession* tls_session_of(SSL* ssl) { return static_cast<TlsSession*>(SSL_get_app_data(ssl)); }

// Every certificate of a PEM text added to the context's trusted roots.
Status add_pem_roots(SSL_CTX* ctx, const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return make_error(ENOMEM, "cannot read the upstream roots");
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int added = 0;
  while (X509Ptr cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
    if (X509_STORE_add_cert(store, cert.get()) != 1)
      return input_error(EINVAL, with_openssl_errors("upstream roots: cannot add a certificate"));
    ++added;
  }
  ERR_clear_error();
  if (added == 0) return input_error(EINVAL, "upstream roots: no PEM certificate in them");
  return {};
}

// A client chain (the leaf first, then its intermediates) and its key, from PEM text.
Status use_pem_identity(SSL_CTX* ctx, const std::string& cert_pem, const std::string& key_pem) {
  BioPtr certs(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  BioPtr key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  if (!certs || !key_bio) return make_error(ENOMEM, "cannot read the client certificate");
  X509Ptr leaf(PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr));
  if (!leaf || SSL_CTX_use_certificate(ctx, leaf.get()) != 1)
    return input_error(EINVAL, with_openssl_errors("client certificate: not a PEM certificate"));
  while (X509Ptr extra{PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr)}) {
    if (SSL_CTX_add1_chain_cert(ctx, extra.get()) != 1)
      return input_error(EINVAL, with_openssl_errors("client certificate: cannot add its chain"));
  }
  ERR_clear_error();
  PkeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1)
    return input_error(EINVAL, with_openssl_errors("client key: not a PEM private key"));
  if (SSL_CTX_check_private_key(ctx) != 1)
    return input_error(EINVAL, with_openssl_errors("client key: not the key of the client certificate"));
  return {};
}

}  // namespace

// The leaf by SNI: called by OpenSSL while it reads the ClientHello, before it
// chooses a cipher, so the certificate set here is the one the client gets.
int tls_servername_callback(SSL* ssl, int* alert, void* /*arg*/) {
  TlsSession* s = tls_session_of(ssl);
  if (s == nullptr) return SSL_TLSEXT_ERR_ALERT_FATAL;
  if (!s->server_ctx_->mints_leaves()) return SSL_TLSEXT_ERR_OK;  // the context's one certificate
  const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  std::string host = sni != nullptr ? sni : s->fallback_host_;
  if (host.empty()) {
    s->error_ = "the client sent no server name (SNI) and the connection has no destination to name the certificate";
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  auto leaf = s->server_ctx_->leaves().get(host);
  if (!leaf) {
    s->error_ = "no certificate for '" + host + "': " + leaf.error().describe();
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  if (SSL_use_certificate(ssl, (*leaf)->cert()) != 1 || SSL_use_PrivateKey(ssl, (*leaf)->key()) != 1) {
    s->error_ = with_openssl_errors("cannot use the leaf certificate of '" + host + "'");
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  s->leaf_ = *leaf;
  s->server_name_ = (*leaf)->host();
  return SSL_TLSEXT_ERR_OK;
}

// http/1.1 or nothing: a client that offers only h2 would speak a protocol the
// proxy does not read, so it is refused by name rather than passed blind.
int tls_alpn_callback(SSL* ssl, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                      unsigned inlen, void* /*arg*/) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kAlpnHttp11, sizeof(kAlpnHttp11), in, inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  if (TlsSession* s = tls_session_of(ssl)) {
    std::string offered;
    for (unsigned i = 0; i < inlen && i + 1 + in[i] <= inlen; i += 1 + in[i])
      offered += (offered.empty() ? "" : ", ") + std::string(reinterpret_cast<const char*>(in + i + 1), in[i]);
    s->error_ = "the client offered ALPN " + offered + " without http/1.1, the only protocol termination speaks";
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

// --- contexts ---

Result<std::shared_ptr<TlsServerContext>> TlsServerContext::create(std::shared_ptr<LeafCache> leaves) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return make_error(0, with_openssl_errors("cannot make a TLS server context"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_tlsext_servername_callback(ctx.get(), tls_servername_callback);
  SSL_CTX_set_alpn_select_cb(ctx.get(), tls_alpn_callback, nullptr);
  // Both peers of a terminated connection are ours to pace: no renegotiation,
  // and buffers released while a connection idles (the relay holds many).
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  return std::shared_ptr<TlsServerContext>(new TlsServerContext(ctx.release(), std::move(leaves)));
}

Result<std::shared_ptr<TlsServerContext>> TlsServerContext::create_with_certificate(const std::string& cert_file,
                                                                                    const std::string& key_file) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return make_error(0, with_openssl_errors("cannot make a TLS server context"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_tlsext_servername_callback(ctx.get(), tls_servername_callback);
  SSL_CTX_set_alpn_select_cb(ctx.get(), tls_alpn_callback, nullptr);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_file.c_str()) != 1)
    return input_error(EINVAL, with_openssl_errors("cert " + cert_file + ": not a readable PEM certificate chain"));
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return input_error(EINVAL, with_openssl_errors("key " + key_file + ": not a readable PEM private key"));
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return input_error(EINVAL, with_openssl_errors("key " + key_file + ": not the key of cert " + cert_file));
  ERR_clear_error();
  return std::shared_ptr<TlsServerContext>(new TlsServerContext(ctx.release(), nullptr));
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

Result<std::shared_ptr<TlsClientContext>> TlsClientContext::create(const TlsClientOptions& options) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return make_error(0, with_openssl_errors("cannot make a TLS client context"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), options.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  if (options.system_roots && SSL_CTX_set_default_verify_paths(ctx.get()) != 1)
    return make_error(0, with_openssl_errors("cannot load the system trust store"));
  if (!options.upstream_ca_pem.empty()) FL_TRY(add_pem_roots(ctx.get(), options.upstream_ca_pem));
  if (!options.upstream_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), options.upstream_ca_file.c_str(), nullptr) != 1)
      return input_error(EINVAL, with_openssl_errors("upstream_ca " + options.upstream_ca_file +
                                                     ": not a readable PEM file of certificates"));
  }
  if (options.client_cert_file.empty() != options.client_key_file.empty())
    return input_error(EINVAL, "client_cert and client_key: give both or neither");
  if (!options.client_cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), options.client_cert_file.c_str()) != 1)
      return input_error(EINVAL, with_openssl_errors("client_cert " + options.client_cert_file +
                                                     ": not a readable PEM certificate chain"));
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), options.client_key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      return input_error(
          EINVAL, with_openssl_errors("client_key " + options.client_key_file + ": not a readable PEM private key"));
    if (SSL_CTX_check_private_key(ctx.get()) != 1)
      return input_error(EINVAL, with_openssl_errors("client_key " + options.client_key_file +
                                                     ": not the key of client_cert " + options.client_cert_file));
  }
  if (options.client_cert_pem.empty() != options.client_key_pem.empty())
    return input_error(EINVAL, "client certificate and key: give both or neither");
  if (!options.client_cert_pem.empty())
    FL_TRY(use_pem_identity(ctx.get(), options.client_cert_pem, options.client_key_pem));
  if (SSL_CTX_set_alpn_protos(ctx.get(), kAlpnHttp11, sizeof(kAlpnHttp11)) != 0)
    return make_error(0, with_openssl_errors("cannot set ALPN"));
  ERR_clear_error();
  return std::shared_ptr<TlsClientContext>(new TlsClientContext(ctx.release()));
}

TlsClientContext::~TlsClientContext() { SSL_CTX_free(ctx_); }

// --- session ---

const char* tls_state_name(TlsState s) {
  switch (s) {
    case TlsState::kHandshaking:
      return "handshaking";
    case TlsState::kEstablished:
      return "established";
    case TlsState::kClosed:
      return "closed";
    case TlsState::kFailed:
      return "failed";
  }
  return "?";
}

Status TlsSession::init(SSL_CTX* ctx, bool server) {
  ssl_ = SSL_new(ctx);
  if (ssl_ == nullptr) return make_error(0, with_openssl_errors("cannot make a TLS session"));
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  if (rbio == nullptr || wbio == nullptr) {
    BIO_free(rbio);
    BIO_free(wbio);
    return make_error(ENOMEM, "cannot make the TLS memory buffers");
  }
  BIO_set_mem_eof_return(rbio, -1);  // empty means "wait", not EOF
  SSL_set_bio(ssl_, rbio, wbio);
  rbio_ = rbio;
  wbio_ = wbio;
  SSL_set_app_data(ssl_, this);
  is_server_ = server;
  if (server)
    SSL_set_accept_state(ssl_);
  else
    SSL_set_connect_state(ssl_);
  return {};
}

Result<std::unique_ptr<TlsSession>> TlsSession::server(std::shared_ptr<TlsServerContext> ctx,
                                                       std::string fallback_host) {
  std::unique_ptr<TlsSession> s(new TlsSession());
  s->server_ctx_ = std::move(ctx);
  s->fallback_host_ = std::move(fallback_host);
  FL_TRY(s->init(s->server_ctx_->native(), true));
  return s;
}

Result<std::unique_ptr<TlsSession>> TlsSession::client(std::shared_ptr<TlsClientContext> ctx, std::string_view host) {
  if (std::string why = leaf_host_problem(host); !why.empty()) return input_error(EINVAL, "upstream host: " + why);
  std::unique_ptr<TlsSession> s(new TlsSession());
  s->client_ctx_ = std::move(ctx);
  s->server_name_ = std::string(host);
  FL_TRY(s->init(s->client_ctx_->native(), false));
  SSL* ssl = s->ssl_;
  const bool ip = tls_is_ip_literal(s->server_name_);
  // The check that makes termination safe: the upstream's certificate must
  // name the host the client asked for. Set per session, never skipped.
  const bool named = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), s->server_name_.c_str()) == 1
                        : SSL_set1_host(ssl, s->server_name_.c_str()) == 1 &&
                              SSL_set_tlsext_host_name(ssl, s->server_name_.c_str()) == 1;
  if (!named) return make_error(0, with_openssl_errors("cannot set the upstream host " + s->server_name_));
  FL_TRY(s->advance());
  return s;
}

TlsSession::~TlsSession() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

std::string TlsSession::handshake_failure(int ssl_error) {
  std::string why = take_openssl_errors();
  if (!is_server_) {
    const long v = SSL_get_verify_result(ssl_);
    if (v != X509_V_OK)
      return "upstream " + server_name_ + ": certificate refused: " + X509_verify_cert_error_string(v);
    return "upstream " + server_name_ + ": TLS handshake failed" + (why.empty() ? "" : ": " + why);
  }
  if (!error_.empty()) return "client: " + error_;
  if (ssl_error == SSL_ERROR_SYSCALL && why.empty()) why = "the connection ended during the handshake";
  return "client: TLS handshake failed" + (why.empty() ? "" : ": " + why);
}

Status TlsSession::fail(std::string message) {
  state_ = TlsState::kFailed;
  error_ = std::move(message);
  return make_error(EPROTO, error_);
}

Status TlsSession::advance() {
  if (state_ == TlsState::kHandshaking) {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    if (r != 1) {
      const int e = SSL_get_error(ssl_, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return {};
      return fail(handshake_failure(e));
    }
    state_ = TlsState::kEstablished;
    flush_pending();
  }
  if (state_ == TlsState::kEstablished) {
    char buf[16384];
    for (;;) {
      size_t n = 0;
      ERR_clear_error();
      if (SSL_read_ex(ssl_, buf, sizeof(buf), &n) == 1) {
        plaintext_in_.append(buf, n);
        continue;
      }
      const int e = SSL_get_error(ssl_, 0);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
      if (e == SSL_ERROR_ZERO_RETURN) {
        state_ = TlsState::kClosed;
        break;
      }
      return fail((is_server_ ? "client: " : "upstream " + server_name_ + ": ") +
                  with_openssl_errors("TLS record error"));
    }
  }
  return {};
}

void TlsSession::flush_pending() {
  if (!pending_out_.empty()) {
    size_t n = 0;
    // A memory BIO takes every byte: SSL_write_ex writes all or fails.
    if (SSL_write_ex(ssl_, pending_out_.data(), pending_out_.size(), &n) == 1) pending_out_.erase(0, n);
  }
  if (close_queued_ && !close_sent_ && pending_out_.empty()) {
    SSL_shutdown(ssl_);  // close_notify into wbio; the peer's is read by advance()
    close_sent_ = true;
  }
}

Status TlsSession::feed_ciphertext(std::string_view bytes) {
  if (state_ == TlsState::kFailed) return make_error(EPROTO, error_);
  if (!bytes.empty() && BIO_write(static_cast<BIO*>(rbio_), bytes.data(), static_cast<int>(bytes.size())) !=
                            static_cast<int>(bytes.size()))
    return fail("cannot buffer " + std::to_string(bytes.size()) + " bytes of ciphertext");
  return advance();
}

void TlsSession::peer_eof() {
  if (state_ == TlsState::kHandshaking)
    (void)fail(is_server_ ? "client: the connection ended during the TLS handshake"
                          : "upstream " + server_name_ + ": the connection ended during the TLS handshake");
  else if (state_ == TlsState::kEstablished)
    state_ = TlsState::kClosed;
}

std::string TlsSession::take_ciphertext() {
  BIO* w = static_cast<BIO*>(wbio_);
  std::string out = bio_text(w);
  (void)BIO_reset(w);
  return out;
}

bool TlsSession::has_ciphertext() const { return BIO_ctrl_pending(static_cast<BIO*>(wbio_)) > 0; }

std::string TlsSession::take_plaintext() { return std::exchange(plaintext_in_, {}); }

Status TlsSession::send_plaintext(std::string_view bytes) {
  if (state_ == TlsState::kFailed) return make_error(EPROTO, error_);
  if (state_ == TlsState::kClosed) return make_error(EPIPE, "the TLS session is closed");
  pending_out_.append(bytes);
  if (state_ == TlsState::kEstablished) flush_pending();
  return {};
}

void TlsSession::close() {
  close_queued_ = true;
  if (state_ == TlsState::kEstablished || state_ == TlsState::kClosed) flush_pending();
}

std::string TlsSession::alpn() const {
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl_, &p, &len);
  return p != nullptr ? std::string(reinterpret_cast<const char*>(p), len) : std::string();
}

std::string TlsSession::protocol() const { return SSL_get_version(ssl_); }

std::string tls_handshake_failure_alert() {
  // record: alert (21), TLS 1.2 legacy version, length 2; level fatal (2), handshake_failure (40)
  return std::string("\x15\x03\x03\x00\x02\x02\x28", 7);
}

}  // namespace faultline
