// The terminated connection's phases; each call moves it as far as its input allows.
#include "userspace/proxy/tls_termination.h"

namespace faultline {

TlsTermination::TlsTermination(std::shared_ptr<TlsServerContext> server, std::shared_ptr<TlsClientContext> client,
                               std::string fallback_host)
    : server_ctx_(std::move(server)), client_ctx_(std::move(client)), fallback_host_(std::move(fallback_host)) {}

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
      upstream_host_ = hello_.server_name.empty() ? fallback_host_ : hello_.server_name;
      if (upstream_host_.empty())
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
  auto s = TlsSession::client(client_ctx_, upstream_host_);
  if (!s) return fail(s.error().describe());
  upstream_ = std::move(*s);
  phase_ = Phase::kUpstreamHandshake;
  return after_upstream_progress();
}

Status TlsTermination::after_upstream_progress() {
  if (phase_ == Phase::kUpstreamHandshake) {
    if (upstream_->state() == TlsState::kFailed) {
      // Fail closed: the client hears a fatal alert, and nothing of its reaches
      // an upstream that was not verified.
      alert_to_client_ = tls_handshake_failure_alert();
      return fail(upstream_->error());
    }
    if (upstream_->state() != TlsState::kEstablished) return {};
    auto s = TlsSession::server(server_ctx_, fallback_host_);
    if (!s) return fail(s.error().describe());
    client_ = std::move(*s);
    phase_ = Phase::kClientHandshake;
    const Status st = client_->feed_ciphertext(std::exchange(held_, {}));
    if (!st) return fail(client_->error());
    return after_client_progress();
  }
  if (phase_ == Phase::kEstablished && upstream_->state() == TlsState::kFailed) return fail(upstream_->error());
  return {};
}

Status TlsTermination::after_client_progress() {
  if (client_->state() == TlsState::kFailed) {
    upstream_->close();
    return fail(client_->error());
  }
  if (phase_ == Phase::kClientHandshake && client_->state() != TlsState::kHandshaking) phase_ = Phase::kEstablished;
  return {};
}

Status TlsTermination::from_upstream(std::string_view bytes) {
  if (phase_ == Phase::kFailed) return make_error(EPROTO, error_);
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
  std::string out = client_ ? client_->take_ciphertext() : std::string();
  return out + std::exchange(alert_to_client_, {});
}

std::string TlsTermination::to_upstream() { return upstream_ ? upstream_->take_ciphertext() : std::string(); }

std::string TlsTermination::take_from_client() { return client_ ? client_->take_plaintext() : std::string(); }
std::string TlsTermination::take_from_upstream() {
  return upstream_ && client_ ? upstream_->take_plaintext() : std::string();
}

Status TlsTermination::send_to_upstream(std::string_view plaintext) {
  if (phase_ != Phase::kEstablished)
    return make_error(EINVAL, std::string("plaintext for the upstream in phase ") + tls_termination_phase_name(phase_));
  return upstream_->send_plaintext(plaintext);
}

Status TlsTermination::send_to_client(std::string_view plaintext) {
  if (phase_ != Phase::kEstablished)
    return make_error(EINVAL, std::string("plaintext for the client in phase ") + tls_termination_phase_name(phase_));
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
