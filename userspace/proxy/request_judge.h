// The proxy's decision interface: a session hands each request head to a
// RequestJudge and does what the verdict says (forward, answer, or hold until
// the judge completes it). The proxy knows sessions, not rules: rules,
// approvals and the activity log live above it (docs/architecture.md, "The proxy").
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "userspace/proxy/endpoint.h"

namespace faultline {

// Which point of a connection a head was taken at.
enum class RequestStage : uint8_t {
  request,  // a plain HTTP request through the forward proxy (absolute-form, rewritten)
  connect,  // a CONNECT: host and port only (target empty)
  tls_sni,  // the ClientHello inside a CONNECT tunnel not terminated: host is its SNI
  inner,    // a request inside a terminated CONNECT tunnel: the full path is known
  stream,   // a redirected connection that is neither HTTP nor TLS: its destination only
};

// One request as the judge sees it. Headers are as received, names in lower case
// (stage tls_sni has none).
struct RequestHead {
  uint64_t id = 0;    // unique in the process; names the request in every later call
  std::string proxy;  // the listener's ProxyConfig::name
  RequestStage stage = RequestStage::request;
  std::string method;  // "GET", "CONNECT" (tls_sni: "CONNECT" too)
  std::string scheme;  // "http", or "https" (connect, tls_sni, inner)
  std::string host;    // a name or an address; IPv6 without brackets
  uint16_t port = 0;
  std::string target;  // path and query ("/v1/messages?beta=1"); empty for connect and tls_sni
  std::vector<std::pair<std::string, std::string>> headers;
  bool tls_terminated = false;  // the proxy reads the plaintext (inner)
  SocketAddress peer;           // the client's address
  // The kernel redirected the connection to the proxy (ProxyConfig's
  // original_destination with forward): `destination` is where the client
  // connected ("10.0.0.5:80", "[::1]:443"), and the upstream is always that
  // address, whatever Host or SNI say. `host` is the Host header's name (plain
  // HTTP), the SNI (TLS), or the destination's address when the client named
  // none (or named an address: the real one is judged); `port` the destination's.
  bool transparent = false;
  std::string destination;
  // Who the proxy's authentication said sent it (ForwardProxy::authenticate);
  // empty when the proxy asks none (the judge's own identity then).
  std::string identity;
};

// What the session does with a request. answer: `response` is a complete HTTP
// response (head and body) the proxy sends as is; with `close` (or a request
// that cannot be kept alive) the connection ends after it, otherwise the
// client's next request is read. A verdict is final: never a reset.
struct RequestVerdict {
  enum class Kind : uint8_t { forward, answer, hold };
  Kind kind = Kind::forward;
  std::string response;           // answer only
  bool close = true;              // answer only
  bool observe_response = false;  // forward only: the response's bytes go to on_response_bytes

  [[nodiscard]] static RequestVerdict forward(bool observe = false) { return {Kind::forward, {}, true, observe}; }
  [[nodiscard]] static RequestVerdict answer(std::string response, bool close = true) {
    return {Kind::answer, std::move(response), close, false};
  }
  [[nodiscard]] static RequestVerdict hold() { return {Kind::hold, {}, true, false}; }
};

class HeldVerdictInbox;

// How a judge completes a held request: copyable, from any thread, at any time
// (also after the connection or the whole proxy is gone: then it is a no-op).
// The first complete() wins; a hold passed again is taken as nothing.
class HeldRequest {
 public:
  HeldRequest() = default;
  HeldRequest(std::shared_ptr<HeldVerdictInbox> inbox, uint64_t id);
  [[nodiscard]] uint64_t id() const { return id_; }
  // false: already completed, a hold, or no worker to deliver to any more.
  bool complete(RequestVerdict verdict) const;

 private:
  std::shared_ptr<HeldVerdictInbox> inbox_;
  std::shared_ptr<std::atomic<bool>> done_;
  uint64_t id_ = 0;
};

// Implemented above the proxy (the guard; a test). Every call comes from a
// relay worker thread, possibly several at once: an implementation is
// thread-safe, quick, and never blocks (a decision that waits on a person or
// a model returns hold() and completes `later` when it is made; the judge owns
// that wait's timeout, the proxy has no timer of its own for it).
class RequestJudge {
 public:
  virtual ~RequestJudge() = default;

  // The verdict on a complete request head. `later` completes a hold().
  [[nodiscard]] virtual RequestVerdict judge(const RequestHead& head, HeldRequest later) = 0;

  // A held request whose client went away (disconnect, or its proxy stopped)
  // before the verdict came: an approval queue drops it. Never called for a
  // request that was not held, nor after its verdict was applied.
  virtual void withdrawn(uint64_t request_id) { (void)request_id; }

  // The response to a request forwarded with observe_response: its bytes as the
  // upstream sent them (head, then body; chunked framing kept; plaintext when
  // TLS is terminated), in order, piece by piece as they pass, then one call
  // with `end` true (the exchange is over, or the connection closed mid-way).
  // Runs on the worker: copy what is needed, never block. For later reading of
  // LLM usage; the default ignores them.
  virtual void on_response_bytes(uint64_t request_id, std::string_view bytes, bool end) {
    (void)request_id;
    (void)bytes;
    (void)end;
  }
};

// The worker's side of HeldRequest: a verdict is handed to `deliver` (the
// worker's command queue, woken by the eventfd its ring always watches), until
// the worker closes the inbox on its way out.
class HeldVerdictInbox {
 public:
  explicit HeldVerdictInbox(std::function<void(uint64_t, RequestVerdict)> deliver) : deliver_(std::move(deliver)) {}
  bool post(uint64_t id, RequestVerdict verdict);
  void close();

 private:
  std::mutex mu_;
  std::function<void(uint64_t, RequestVerdict)> deliver_;
};

}  // namespace faultline
