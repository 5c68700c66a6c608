// One terminated TLS connection, as the relay drives it: bytes from either
// socket in, bytes for either socket out, plaintext of both directions in the
// middle (where the HTTP layer reads and faults). It enforces the order that
// keeps termination safe: the client's ClientHello is read, not answered; the
// upstream is connected and verified for the name the client asked for; only
// then does the client's handshake go on. Owns no socket, never blocks.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "userspace/proxy/tls_client_hello.h"
#include "userspace/proxy/tls_session.h"

namespace faultline {

class TlsTermination {
 public:
  enum class Phase {
    kReadingHello,       // feed the client's bytes (from_client)
    kConnectUpstream,    // connect a socket to the upstream, then upstream_connected()
    kUpstreamHandshake,  // write to_upstream(), feed from_upstream()
    kClientHandshake,    // write to_client(), feed from_client()
    kEstablished,        // plaintext both ways until each side is done
    kNotTls,             // the client's first bytes are not TLS: held_client_bytes() has them
    kFailed,             // error() says why; to_client() (and to_upstream()) hold the alert to send
  };

  // fallback_host names the client's leaf when it sends no SNI (its original
  // destination's address); empty refuses such a client. upstream_name, when
  // set, is the name the upstream is verified for whatever the client asked
  // (a proxy with a configured upstream). Either side may be plain: without
  // `server` the client's bytes are plaintext (no hello is read: the phase
  // starts at kConnectUpstream), without `client` the upstream's are; the
  // calls are the same, the plain side's bytes pass as they are.
  TlsTermination(std::shared_ptr<TlsServerContext> server, std::shared_ptr<TlsClientContext> client,
                 std::string fallback_host = {}, std::string upstream_name = {});

  // Ciphertext read from the client's socket, any split.
  [[nodiscard]] Status from_client(std::string_view bytes);
  // Ciphertext read from the upstream's socket, any split.
  [[nodiscard]] Status from_upstream(std::string_view bytes);
  // kConnectUpstream -> kUpstreamHandshake: the socket is connected (to the
  // original destination or the configured upstream; the name checked is upstream_host()).
  [[nodiscard]] Status upstream_connected();
  // A socket ended (EOF or error). During a handshake that fails the connection.
  void client_eof();
  void upstream_eof();

  // Bytes to write to each socket (handshakes, records, alerts, close_notify).
  [[nodiscard]] std::string to_client();
  [[nodiscard]] std::string to_upstream();

  // Plaintext: the client's requests, the upstream's responses.
  [[nodiscard]] std::string take_from_client();
  [[nodiscard]] std::string take_from_upstream();
  [[nodiscard]] Status send_to_upstream(std::string_view plaintext);
  [[nodiscard]] Status send_to_client(std::string_view plaintext);
  // close_notify to one side (after what is queued for it).
  void close_client();
  void close_upstream();
  // The side sent close_notify or its socket ended.
  [[nodiscard]] bool client_done() const;
  [[nodiscard]] bool upstream_done() const;

  [[nodiscard]] Phase phase() const { return phase_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  // The name the upstream is verified for: the SNI, else fallback_host.
  [[nodiscard]] const std::string& upstream_host() const { return upstream_host_; }
  [[nodiscard]] const ClientHello& hello() const { return hello_; }
  // The client's bytes read while scanning (with kNotTls: to pass through).
  [[nodiscard]] const std::string& held_client_bytes() const { return held_; }
  // ALPN agreed with the client ("http/1.1"), once established.
  [[nodiscard]] std::string client_alpn() const;

 private:
  [[nodiscard]] Status fail(std::string message);
  [[nodiscard]] Status after_upstream_progress();
  [[nodiscard]] Status after_client_progress();
  [[nodiscard]] Status start_client_side();

  std::shared_ptr<TlsServerContext> server_ctx_;
  std::shared_ptr<TlsClientContext> client_ctx_;
  std::string fallback_host_;
  std::string upstream_name_;
  Phase phase_ = Phase::kReadingHello;
  std::string error_;
  std::string held_;         // the client's bytes until its session takes them
  size_t hello_wanted_ = 0;  // no rescan of held_ before it is this long
  ClientHello hello_;
  std::string upstream_host_;
  std::unique_ptr<TlsSession> upstream_;  // towards the upstream (client side of TLS)
  std::unique_ptr<TlsSession> client_;    // towards the client (server side of TLS)
  std::string alert_to_client_;
  // The plain side's bytes (no session there): in and out of each.
  std::string plain_from_client_, plain_to_client_, plain_from_upstream_, plain_to_upstream_;
  bool client_eof_ = false;
  bool upstream_eof_ = false;
};

[[nodiscard]] const char* tls_termination_phase_name(TlsTermination::Phase p);

}  // namespace faultline
