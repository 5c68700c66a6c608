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

// A byte stream rewritten as it passes: fed pieces in order, returns the
// bytes to send in their place (possibly none while it holds some back);
// finish() at the stream's end returns what it still held. Used on one
// worker thread at a time (the connection's), never concurrently.
class ByteTransformer {
 public:
  virtual ~ByteTransformer() = default;
  [[nodiscard]] virtual std::string feed(std::string_view bytes) = 0;
  [[nodiscard]] virtual std::string finish() = 0;
};

// One piece of a request body for RequestJudge::judge_body: the body's bytes
// as the client meant them (chunked framing removed), in order.
struct RequestBodyChunk {
  std::string_view bytes;  // the body bytes since the last call (may be empty)
  bool end = false;        // the judge gets no more: decide now (need_body is then taken as a refusal)
  bool over_cap = false;   // end because the body is longer than the proxy holds (HttpLimits::max_body_hold_bytes)
};

// What the session does with a request. answer: `response` is a complete HTTP
// response (head and body) the proxy sends as is; with `close` (or a request
// that cannot be kept alive) the connection ends after it, otherwise the
// client's next request is read. A verdict is final: never a reset.
// need_body: the judge wants the request's body before it decides
// (judge() only; a request without a body then gets one judge_body call with
// `end` and no bytes). The session holds the body it reads (framing and all)
// and sends nothing upstream until a final verdict.
struct RequestVerdict {
  enum class Kind : uint8_t { forward, answer, hold, need_body };
  Kind kind = Kind::forward;
  std::string response;  // answer only
  bool close = true;     // answer only
  // answer only: pieces sent after `response`, each once its delay (ms) has
  // passed since the piece before it was sent (a recorded stream replayed
  // with its timing); the connection closes (with `close`) after the last.
  std::vector<std::pair<uint64_t, std::string>> answer_after;
  bool observe_response = false;  // forward only: the response's bytes go to on_response_bytes
  // forward only: header fields set in the head sent upstream (replacing a
  // field of the same name, else added), e.g. Accept-Encoding: identity.
  std::vector<std::pair<std::string, std::string>> set_headers;
  // forward only, after need_body with the body held whole (its judge_body
  // saw `end` without `over_cap`): the body goes upstream through it, with
  // the head's Content-Length set to the result's length (Transfer-Encoding
  // dropped). Ignored for a body not held whole.
  std::shared_ptr<ByteTransformer> request_body;
  // forward only: the upstream's raw response bytes (head, then the body with
  // its framing) go through it, and the client gets what it returns (the
  // framing is then its business: LlmStreamFilter re-frames chunks).
  // on_response_bytes still sees the raw bytes.
  std::shared_ptr<ByteTransformer> response_body;

  [[nodiscard]] static RequestVerdict forward(bool observe = false) {
    RequestVerdict v;
    v.observe_response = observe;
    return v;
  }
  [[nodiscard]] static RequestVerdict answer(std::string response, bool close = true) {
    RequestVerdict v;
    v.kind = Kind::answer;
    v.response = std::move(response);
    v.close = close;
    return v;
  }
  [[nodiscard]] static RequestVerdict hold() {
    RequestVerdict v;
    v.kind = Kind::hold;
    return v;
  }
  [[nodiscard]] static RequestVerdict need_body() {
    RequestVerdict v;
    v.kind = Kind::need_body;
    return v;
  }
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

  // The body of a request judge() answered need_body for, piece by piece as
  // it arrives (never blocking: the worker goes on with other connections
  // between calls). need_body: more, please; forward, answer or hold: the
  // final verdict (a hold is completed through `later` as for judge()).
  // Default: forward.
  [[nodiscard]] virtual RequestVerdict judge_body(uint64_t request_id, const RequestBodyChunk& chunk,
                                                  HeldRequest later) {
    (void)request_id;
    (void)chunk;
    (void)later;
    return RequestVerdict::forward();
  }

  // A held request, or one whose body is being read for judge_body, whose
  // client went away (disconnect, or its proxy stopped) before the verdict
  // came: an approval queue drops it. Never called for a request without a
  // verdict pending, nor after its verdict was applied.
  virtual void withdrawn(uint64_t request_id) { (void)request_id; }

  // The response to a request forwarded with observe_response: its bytes as the
  // upstream sent them (head, then body; chunked framing kept; plaintext when
  // TLS is terminated), in order, piece by piece as they pass, then one call
  // with `end` true (the exchange is over, or the connection closed mid-way).
  // A forwarded request whose upstream could not be reached gets the `end`
  // call alone (no bytes: nothing reached the upstream).
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
