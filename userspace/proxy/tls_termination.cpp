// The terminated connection's phases; each call moves it as far as its input allows.
#include "userspace/proxy/tls_termination.h"

#include <utility>

namespace faultline {

TlsTermination::TlsTermination(std::shared_ptr<TlsServerContext> server, std::shared_ptr<TlsClientContext> client,
                               std::string fallback_host, std::string upstream_name)
    : server_ctx_(std::move(server)),
      client_ctx_(std::move(client)),
      fallback_host_(std::move(fallback_host)),
      upstream_name_(std::move(upstream_name)) {
  if (!server_ctx_) {  // a plain client: nothing to read before the upstream
    upstream_host_ = upstream_name_.empty() ? fallback_host_ : upstream_name_;
    phase_ = Phase::kConnectUpstream;
  }
}

Status TlsTermination::fail(std::string message) {
  phase_ = Phase::kFailed;
  error_ = std::move(message);
  return make_error(EPROTO, error_);
}

Status TlsTermination::from_client(std::string_view bytes) {
  switch (phase_) {
    case Phase::kReadingHello: {
      held_.append(bytes);
      if (held_.size() < hello_wanted_) return {};  // the record is not complete yet
      const auto scan =
          scan_client_hello(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(held_.data()), held_.size()));
      if (scan.status == ClientHelloStatus::kNeedMore) {
        hello_wanted_ = scan.wanted;
        return {};
      }
      if (scan.status == ClientHelloStatus::kNotTls) {
        phase_ = Phase::kNotTls;
        error_ = "client: " + scan.error;
        return {};
      }
      if (scan.status == ClientHelloStatus::kMalformed) return fail("client: " + scan.error);
      hello_ = scan.hello;
      upstream_host_ = !upstream_name_.empty()      ? upstream_name_
                       : hello_.server_name.empty() ? fallback_host_
                                                    : hello_.server_name;
      if (upstream_host_.empty() && client_ctx_)
        return fail("client: no server name (SNI) and no destination address to verify the upstream for");
      phase_ = Phase::kConnectUpstream;
      return {};
    }
    case Phase::kConnectUpstream:
    case Phase::kUpstreamHandshake:
      held_.append(bytes);  // the client's next flight waits with its hello
      return {};
    case Phase::kClientHandshake:
    case Phase::kEstablished: {
      if (!server_ctx_) {
        plain_from_client_.append(bytes);
        return {};
      }
      const Status st = client_->feed_ciphertext(bytes);
      if (!st) return fail(client_->error());
      return after_client_progress();
    }
    case Phase::kNotTls:
      held_.append(bytes);
      return {};
    case Phase::kFailed:
      return make_error(EPROTO, error_);
  }
  return {};
}

Status TlsTermination::upstream_connected() {
  if (phase_ != Phase::kConnectUpstream)
    return make_error(EINVAL, std::string("upstream_connected() in phase ") + tls_termination_phase_name(phase_));
  if (!client_ctx_) return start_client_side();  // a plain upstream: nothing to verify
  auto s = TlsSession::client(client_ctx_, upstream_host_);
  if (!s) return fail(s.error().describe());
  upstream_ = std::move(*s);
  phase_ = Phase::kUpstreamHandshake;
  return after_upstream_progress();
}

Status TlsTermination::after_upstream_progress() {
  if (phase_ == Phase::kUpstreamHandshake) {
    if (upstream_->state() == TlsState::kFailed) {
      // Fail closed: the client hears a fatal alert (a plain client a 502:
      // only HTTP proxies terminate), and nothing of its reaches an upstream
      // that was not verified.
      alert_to_client_ = server_ctx_ ? tls_handshake_failure_alert()
                                     : "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                                       "Content-Length: " +
                                           std::to_string(upstream_->error().size() + 1) + "\r\n\r\n" +
                                           upstream_->error() + "\n";
      return fail(upstream_->error());
    }
    if (upstream_->state() != TlsState::kEstablished) return {};
    return start_client_side();
  }
  if (phase_ == Phase::kEstablished && upstream_->state() == TlsState::kFailed) return fail(upstream_->error());
  return {};
}

// The upstream is there (verified, or plain): the client's side goes on. A
// plain client's bytes held so far are its first plaintext.
Status TlsTermination::start_client_side() {
  if (!server_ctx_) {
    phase_ = Phase::kEstablished;
    plain_from_client_ += std::exchange(held_, {});
    return {};
  }
  auto s = TlsSession::server(server_ctx_, fallback_host_);
  if (!s) return fail(s.error().describe());
  client_ = std::move(*s);
  phase_ = Phase::kClientHandshake;
  const Status st = client_->feed_ciphertext(std::exchange(held_, {}));
  if (!st) return fail(client_->error());
  return after_client_progress();
}

Status TlsTermination::after_client_progress() {
  if (client_->state() == TlsState::kFailed) {
    if (upstream_) upstream_->close();
    return fail(client_->error());
  }
  if (phase_ == Phase::kClientHandshake && client_->state() != TlsState::kHandshaking) phase_ = Phase::kEstablished;
  return {};
}

Status TlsTermination::from_upstream(std::string_view bytes) {
  if (phase_ == Phase::kFailed) return make_error(EPROTO, error_);
  if (!client_ctx_) {  // a plain upstream
    plain_from_upstream_.append(bytes);
    return {};
  }
  if (!upstream_) return make_error(EINVAL, "upstream bytes before the upstream was connected");
  const Status st = upstream_->feed_ciphertext(bytes);
  const Status next = after_upstream_progress();
  if (!st && phase_ != Phase::kFailed) return fail(upstream_->error());
  return next;
}

void TlsTermination::client_eof() {
  client_eof_ = true;
  if (client_) client_->peer_eof();
  if (phase_ == Phase::kReadingHello || phase_ == Phase::kConnectUpstream || phase_ == Phase::kUpstreamHandshake ||
      phase_ == Phase::kClientHandshake)
    (void)fail("client: the connection ended during the TLS handshake");
}

void TlsTermination::upstream_eof() {
  upstream_eof_ = true;
  if (!upstream_) return;
  upstream_->peer_eof();
  if (phase_ == Phase::kUpstreamHandshake) (void)after_upstream_progress();
}

std::string TlsTermination::to_client() {
  std::string out = client_ ? client_->take_ciphertext() : std::exchange(plain_to_client_, {});
  return out + std::exchange(alert_to_client_, {});
}

std::string TlsTermination::to_upstream() {
  if (!client_ctx_) return std::exchange(plain_to_upstream_, {});
  return upstream_ ? upstream_->take_ciphertext() : std::string();
}

std::string TlsTermination::take_from_client() {
  if (!server_ctx_) return phase_ == Phase::kEstablished ? std::exchange(plain_from_client_, {}) : std::string();
  return client_ ? client_->take_plaintext() : std::string();
}

// Nothing of the upstream's reaches a client before its side is up.
std::string TlsTermination::take_from_upstream() {
  const bool client_up = server_ctx_ ? client_ != nullptr : phase_ == Phase::kEstablished;
  if (!client_up) return {};
  if (!client_ctx_) return std::exchange(plain_from_upstream_, {});
  return upstream_ ? upstream_->take_plaintext() : std::string();
}

Status TlsTermination::send_to_upstream(std::string_view plaintext) {
  if (phase_ != Phase::kEstablished)
    return make_error(EINVAL, std::string("plaintext for the upstream in phase ") + tls_termination_phase_name(phase_));
  if (!client_ctx_) {
    plain_to_upstream_.append(plaintext);
    return {};
  }
  return upstream_->send_plaintext(plaintext);
}

Status TlsTermination::send_to_client(std::string_view plaintext) {
  if (phase_ != Phase::kEstablished)
    return make_error(EINVAL, std::string("plaintext for the client in phase ") + tls_termination_phase_name(phase_));
  if (!server_ctx_) {
    plain_to_client_.append(plaintext);
    return {};
  }
  return client_->send_plaintext(plaintext);
}

void TlsTermination::close_client() {
  if (client_) client_->close();
}

void TlsTermination::close_upstream() {
  if (upstream_) upstream_->close();
}

bool TlsTermination::client_done() const { return client_eof_ || (client_ && client_->state() == TlsState::kClosed); }

bool TlsTermination::upstream_done() const {
  return upstream_eof_ || (upstream_ && upstream_->state() == TlsState::kClosed);
}

std::string TlsTermination::client_alpn() const { return client_ ? client_->alpn() : std::string(); }

const char* tls_termination_phase_name(TlsTermination::Phase p) {
  switch (p) {
    case TlsTermination::Phase::kReadingHello:
      return "reading-hello";
    case TlsTermination::Phase::kConnectUpstream:
      return "connect-upstream";
    case TlsTermination::Phase::kUpstreamHandshake:
      return "upstream-handshake";
    case TlsTermination::Phase::kClientHandshake:
      return "client-handshake";
    case TlsTermination::Phase::kEstablished:
      return "established";
    case TlsTermination::Phase::kNotTls:
      return "not-tls";
    case TlsTermination::Phase::kFailed:
      return "failed";
  }
  return "?";
}

}  // namespace faultline
