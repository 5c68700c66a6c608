// TLS on memory BIOs for the io_uring relay: the relay owns the sockets and
// moves bytes; a TlsSession turns ciphertext read from a peer into plaintext
// and plaintext into ciphertext to write, and never blocks or touches a file
// descriptor. Termination pairs two of them on one connection: a server
// session towards the client (a leaf minted for its SNI, ALPN http/1.1) and a
// client session towards the upstream (verified against the system trust store
// with the host name checked, never disabled).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/proxy/tls_leaf_cache.h"

struct ssl_ctx_st;
struct ssl_st;

namespace faultline {

// The server side's shared configuration: TLS 1.2+, the leaf chosen per SNI in
// the servername callback, ALPN limited to http/1.1 (a client that offers ALPN
// without http/1.1 gets no_application_protocol, not a silent downgrade).
class TlsServerContext {
 public:
  [[nodiscard]] static Result<std::shared_ptr<TlsServerContext>> create(std::shared_ptr<LeafCache> leaves);
  // One certificate for every client, whatever its SNI: the chain in cert_file
  // (PEM, the leaf first) and its key in key_file. Errors name the file.
  [[nodiscard]] static Result<std::shared_ptr<TlsServerContext>> create_with_certificate(const std::string& cert_file,
                                                                                         const std::string& key_file);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  [[nodiscard]] ssl_ctx_st* native() const { return ctx_; }
  [[nodiscard]] LeafCache& leaves() const { return *leaves_; }
  [[nodiscard]] bool mints_leaves() const { return leaves_ != nullptr; }

 private:
  TlsServerContext(ssl_ctx_st* ctx, std::shared_ptr<LeafCache> leaves) : ctx_(ctx), leaves_(std::move(leaves)) {}
  ssl_ctx_st* ctx_;
  std::shared_ptr<LeafCache> leaves_;
};

struct TlsClientOptions {
  // A PEM file of extra trusted roots (private upstreams, tests), added to the
  // system store, never replacing it. Empty: the system store alone.
  std::string upstream_ca_file;
  // A client certificate for upstreams that ask for one (mTLS): the chain
  // (PEM, the leaf first) and its key. Both or neither.
  std::string client_cert_file;
  std::string client_key_file;
  // The same in memory (a kubeconfig's *-data, its files read by the caller):
  // PEM roots added like upstream_ca_file, a client chain (the leaf first) and
  // its key, both or neither. Never written to a file.
  std::string upstream_ca_pem;
  std::string client_cert_pem;
  std::string client_key_pem;
  // false: the system store is not loaded, only upstream_ca_file/_pem are
  // trusted (a kubeconfig's certificate-authority, as kubectl trusts it).
  bool system_roots = true;
  // false: the upstream's certificate is not checked at all (a kubeconfig's
  // insecure-skip-tls-verify: true, which kubectl honours too).
  bool verify = true;
};

// The client side's shared configuration: TLS 1.2+, peer verification on, the
// system trust store (OpenSSL's default paths: /etc/ssl/certs on Debian, or
// SSL_CERT_FILE / SSL_CERT_DIR), plus upstream_ca_file; ALPN http/1.1.
class TlsClientContext {
 public:
  [[nodiscard]] static Result<std::shared_ptr<TlsClientContext>> create(const TlsClientOptions& options = {});
  ~TlsClientContext();
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;

  [[nodiscard]] ssl_ctx_st* native() const { return ctx_; }

 private:
  explicit TlsClientContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
};

enum class TlsState {
  kHandshaking,  // feed the peer's bytes, write take_ciphertext() out
  kEstablished,  // plaintext flows both ways
  kClosed,       // the peer sent close_notify: no more plaintext will come
  kFailed,       // error() says why; take_ciphertext() may still hold an alert to send
};

[[nodiscard]] const char* tls_state_name(TlsState s);

class TlsSession {
 public:
  // Towards the client. fallback_host names the leaf when the client sends no
  // SNI (it connected by address: the original destination's IP); empty: such
  // a client is refused with unrecognized_name.
  [[nodiscard]] static Result<std::unique_ptr<TlsSession>> server(std::shared_ptr<TlsServerContext> ctx,
                                                                  std::string fallback_host = {});
  // Towards the upstream: host is sent as SNI (unless it is an IP address) and
  // checked against the upstream certificate (DNS SAN, or IP SAN for an address).
  // The handshake starts at once: take_ciphertext() holds the ClientHello.
  [[nodiscard]] static Result<std::unique_ptr<TlsSession>> client(std::shared_ptr<TlsClientContext> ctx,
                                                                  std::string_view host);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Bytes read from the peer's socket (any split). Advances the handshake and
  // decrypts what it can. An error is also the session's state (kFailed).
  [[nodiscard]] Status feed_ciphertext(std::string_view bytes);
  // The peer's socket closed (EOF) without close_notify: a handshake still
  // running fails; an established session becomes kClosed (truncation is the
  // relay's to judge: HTTP knows whether the message was complete).
  void peer_eof();
  // Bytes to write to the peer's socket: handshake messages, records, alerts.
  [[nodiscard]] std::string take_ciphertext();
  [[nodiscard]] bool has_ciphertext() const;
  // Plaintext from the peer, decrypted so far.
  [[nodiscard]] std::string take_plaintext();
  // Plaintext for the peer: encrypted now if established, else queued until the
  // handshake completes. Refused once closed or failed.
  [[nodiscard]] Status send_plaintext(std::string_view bytes);
  // Queues close_notify (after any queued plaintext).
  void close();

  [[nodiscard]] TlsState state() const { return state_; }
  [[nodiscard]] bool established() const { return state_ == TlsState::kEstablished; }
  [[nodiscard]] const std::string& error() const { return error_; }
  // The server name: the client's SNI (server side) or the upstream host (client side).
  [[nodiscard]] const std::string& server_name() const { return server_name_; }
  // The negotiated ALPN protocol ("http/1.1"), empty if none.
  [[nodiscard]] std::string alpn() const;
  // "TLSv1.3", ...
  [[nodiscard]] std::string protocol() const;

 private:
  TlsSession() = default;
  [[nodiscard]] Status init(ssl_ctx_st* ctx, bool server);
  [[nodiscard]] Status advance();
  [[nodiscard]] Status fail(std::string message);
  void flush_pending();
  [[nodiscard]] std::string handshake_failure(int ssl_error);
  friend int tls_servername_callback(ssl_st* ssl, int* alert, void* arg);
  friend int tls_alpn_callback(ssl_st*, const unsigned char**, unsigned char*, const unsigned char*, unsigned, void*);

  std::shared_ptr<TlsServerContext> server_ctx_;
  std::shared_ptr<TlsClientContext> client_ctx_;
  ssl_st* ssl_ = nullptr;
  void* rbio_ = nullptr;  // BIO*: ciphertext in (owned by ssl_)
  void* wbio_ = nullptr;  // BIO*: ciphertext out (owned by ssl_)
  bool is_server_ = false;
  TlsState state_ = TlsState::kHandshaking;
  std::string error_;
  std::string server_name_;
  std::string fallback_host_;
  std::string plaintext_in_;
  std::string pending_out_;  // plaintext sent before the handshake completed
  bool close_queued_ = false;
  bool close_sent_ = false;
  std::shared_ptr<const LeafCertificate> leaf_;
};

// A fatal handshake_failure alert record, for a client whose upstream was
// refused before its own handshake began: the client fails at once and closed,
// with "alert handshake failure" rather than a bare reset.
[[nodiscard]] std::string tls_handshake_failure_alert();

}  // namespace faultline
