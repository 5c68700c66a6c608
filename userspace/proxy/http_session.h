// One HTTP/1.1 connection through the proxy, as a state machine over the bytes
// each side sends: requests and responses parsed incrementally (Node's
// http-parser), one exchange at a time (a pipelined request waits in the
// client's buffer until the response before it is complete), each request
// matched against the proxy's HTTP faults when its head is complete. No I/O:
// the relay asks it what to do with the bytes it holds (client_step,
// server_step) and does it, so the fuzz target drives it the same way.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "userspace/proxy/attempt_counter.h"
#include "userspace/proxy/http_fault.h"
#include "userspace/proxy/request_judge.h"

struct http_parser;

namespace faultline {

class TlsServerContext;
class TlsClientContext;

// What protects the proxy from a client: a head bigger than max_header_bytes or
// with more than max_headers fields is answered 431, a head not complete
// head_timeout_ms after its first byte 408 (both close the connection).
struct HttpLimits {
  uint32_t max_header_bytes = 32768;
  uint32_t max_headers = 100;
  uint32_t head_timeout_ms = 10'000;
  // A judge that asks for a request's body (RequestVerdict::need_body) gets
  // at most this much of it held; past it, it decides on what it has.
  uint32_t max_body_hold_bytes = 4u << 20;
};

// A fault as the workers hold it: its counters survive updates of the set.
struct HttpFaultEntry {
  HttpFault fault;
  std::shared_ptr<std::atomic<uint64_t>> hits;  // requests it was applied to
  // Which attempt each request is (fault.attempts), over every connection.
  std::shared_ptr<AttemptCounter> attempts = std::make_shared<AttemptCounter>();
  // Requests its match took (fault.first_n), over every connection.
  std::shared_ptr<std::atomic<int64_t>> matched = std::make_shared<std::atomic<int64_t>>(0);
};

// What an HTTP proxy does with a connection whose first bytes are a TLS
// ClientHello (docs/tls.md). off: nothing (the bytes are not HTTP: 400);
// sni: pass-through, matched by the SNI for the faults needs_plaintext()
// allows, then relayed untouched; terminate: the client's TLS ended with a leaf
// of the local CA, the upstream's verified, HTTP faults on the plaintext.
// own: the proxy's own TLS, asked for through the Toxiproxy API (docs/proxy.md,
// "TLS"): it listens with TLS when `server` is set (a client that does not
// speak TLS is closed) and speaks TLS to its upstream when `client` is set,
// verified for upstream_name; either alone, or both.
enum class HttpTlsMode : uint8_t { off, sni, terminate, own };

// A proxy's own TLS as asked (listen_tls, upstream_tls, ...), kept to show it
// back and to hand it over; HttpTls's contexts are made from it.
struct ProxyTlsSpec {
  bool listen = false;    // listen_tls
  std::string cert, key;  // listen_tls's files; empty: a leaf of the local CA per SNI
  bool upstream = false;  // upstream_tls
  std::string upstream_ca, client_cert, client_key;
  bool operator==(const ProxyTlsSpec&) const = default;
};

// terminate: an upstream with a client context of its own (its own roots, a
// client certificate: the guard's --k8s-kubeconfig), chosen when the
// connection's SNI or destination host is one of `hosts` and its port `port`.
struct UpstreamTlsClient {
  std::vector<std::string> hosts;  // lowercase; IPv6 without brackets
  uint16_t port = 0;
  std::shared_ptr<TlsClientContext> client;
};

struct HttpTls {
  HttpTlsMode mode = HttpTlsMode::off;
  std::shared_ptr<TlsServerContext> server;         // terminate, own: towards clients
  std::shared_ptr<TlsClientContext> client;         // terminate, own: towards upstreams
  std::string upstream_name;                        // own: what the upstream's certificate must name
  ProxyTlsSpec spec;                                // own: as asked
  std::vector<UpstreamTlsClient> upstream_clients;  // terminate: these upstreams' own, before `client`
};

// The client context for an upstream of a terminated connection: the first
// upstream_clients entry naming `sni` or `host` (any case) at `port`, else tls.client.
[[nodiscard]] std::shared_ptr<TlsClientContext> upstream_client_for(const HttpTls& tls, std::string_view sni,
                                                                    std::string_view host, uint16_t port);

// A proxy's HTTP mode: its faults in the order added and its limits. Immutable
// once published (part of the ToxicSet the workers swap).
struct HttpRules {
  std::vector<HttpFaultEntry> faults;
  HttpLimits limits;
  std::string upstream_host;  // what a request without a Host header is matched on
  HttpTls tls;
};

// A TLS connection not terminated: the first fault that can apply without the
// plaintext (needs_plaintext() empty) whose host matches `host` (the SNI, with
// ":port" the connection's destination port) and whose percent takes it
// (drawn from rng); its counter is counted. nullptr: none.
[[nodiscard]] const HttpFaultEntry* fault_by_sni(const HttpRules& rules, std::string_view sni, uint16_t port,
                                                 uint64_t& rng);

enum class HttpAct : uint8_t {
  more,        // nothing to do until more bytes arrive
  consume,     // the session took the first `bytes` of the input (a request head): drop them
  forward,     // send the first `bytes` of the input on
  drop,        // discard the first `bytes` of the input
  send_head,   // send head() to the server, then call head_sent()
  respond,     // send take_answer() to the client, then call answer_sent()
  sleep,       // wait delay_ms, then step again
  reset,       // close both sides with an RST
  cut,         // send the first `bytes` of the input, then close both sides (FIN)
  wait,        // nothing until the other direction has moved (the exchange must finish)
  judge,       // (judged sessions) the head is complete: hand it to the judge, then a verdict_*()
  judge_body,  // (judged sessions) take_body_chunk() for the judge, then body_more() or a verdict_*()
  interim,     // send take_interim() (a 100 Continue) to the client, then step again
};

struct HttpStep {
  HttpAct act = HttpAct::more;
  size_t bytes = 0;
  uint64_t delay_ms = 0;
};

class HttpSession {
 public:
  // `upstream_host`: the Host a request without one is matched on.
  HttpSession(std::string upstream_host, uint64_t seed);
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  // Every request head waits for a verdict (the forward proxy's RequestJudge,
  // request_judge.h): client_step says judge once, then wait until one of
  // verdict_forward(), verdict_answer() or tunnel_established() is called.
  void judge_requests() { judged_ = true; }
  // Who sent the requests (the peer's address without its port): part of the
  // fingerprint that counts a fault's attempts.
  void set_client(std::string client) { client_ = std::move(client); }
  [[nodiscard]] bool awaiting_verdict() const { return state_ == Req::judging || state_ == Req::body_judging; }
  // The request whose head is complete: its method ("GET"), target as written,
  // fields (names lower case), whether it is an upgrade (CONNECT is one).
  [[nodiscard]] std::string method() const;
  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& headers() const { return headers_; }
  // The verdicts. forward: the proxy's HTTP faults are matched, then the head
  // goes on (as replaced, if it was). answer: `response` goes to the client
  // once the request's body is read (dropped); the connection closes after it
  // when `close` or the request cannot be kept alive.
  void verdict_forward(const HttpRules& rules);
  // `after`: pieces that follow `response`, each once its delay (ms) has
  // passed since the piece before it was sent (RequestVerdict::answer_after).
  void verdict_answer(std::string response, bool close, std::vector<std::pair<uint64_t, std::string>> after = {});
  // The head the upstream gets instead (origin-form), ending as head() does.
  void replace_head(std::string head) { head_ = std::move(head); }

  // The body stage (RequestVerdict::need_body): the request's body is read
  // and held (its bytes as received, and de-chunked for the judge), and
  // client_step says judge_body with each new piece, until a verdict_*(); a
  // forward then sends the head and the held bytes before the rest.
  void verdict_need_body();
  struct BodyPiece {
    std::string bytes;  // de-chunked body bytes since the last take
    bool end = false;   // the whole body, or the cap reached (over_cap)
    bool over_cap = false;
  };
  [[nodiscard]] BodyPiece take_body_chunk();
  void body_more();  // the judge wants more: reading goes on
  [[nodiscard]] bool in_body_stage() const { return state_ == Req::body_hold || state_ == Req::body_judging; }
  // What a forward verdict changes in the request sent upstream, applied by
  // verdict_forward: header fields set, and a held whole body transformed
  // (Content-Length set to its new length, Transfer-Encoding dropped).
  void plan_forward(std::vector<std::pair<std::string, std::string>> set_headers,
                    std::shared_ptr<ByteTransformer> request_body);
  // A CONNECT whose upstream is connected: "200 Connection established" is the
  // answer; once it is sent (answer_sent()) tunnel_ready() and the session is
  // done: the bytes after it are the tunnel's.
  void tunnel_established();
  [[nodiscard]] bool tunnel_ready() const { return connect_ok_ && state_ == Req::closed; }

  // The next thing to do with `input`, the bytes from the client not yet
  // handled (possibly empty). `rules` are the proxy's current faults.
  [[nodiscard]] HttpStep client_step(std::string_view input, const HttpRules& rules);
  // The same for bytes from the server.
  [[nodiscard]] HttpStep server_step(std::string_view input);

  [[nodiscard]] const std::string& head() const { return head_; }
  void head_sent();
  [[nodiscard]] std::string take_answer() { return std::move(answer_); }
  // The interim response HttpAct::interim sends ("HTTP/1.1 100 Continue").
  [[nodiscard]] static std::string_view take_interim() { return "HTTP/1.1 100 Continue\r\n\r\n"; }
  // The answer is out: the connection closes when answer_closes(), else the
  // next request may come.
  void answer_sent();
  [[nodiscard]] bool answer_closes() const { return answer_close_ && state_ == Req::closed; }

  // The request-head clock (408): in_head() while a head has begun and is not
  // complete; head_serial() names that head. head_timed_out() makes the 408.
  [[nodiscard]] bool in_head() const;
  [[nodiscard]] uint64_t head_serial() const { return serial_; }
  void head_timed_out();

  // The current response is complete (its exchange may still wait for the request).
  [[nodiscard]] bool response_done() const { return resp_complete_; }

  // An answer of the proxy's own is due or being sent: the server's end of
  // stream must wait for it.
  [[nodiscard]] bool holds_client() const;
  // The other direction may be able to move now (read once).
  [[nodiscard]] bool take_kick() { return std::exchange(kick_, false); }

  // Callbacks of the parsers (http-parser's C callbacks land here).
  struct Parse;

 private:
  enum class Req : uint8_t {
    head,
    judging,
    collect,       // a fault counts attempts by fingerprint: the body is read (and held) before deciding
    body_hold,     // reading the body for the judge
    body_judging,  // a piece of it is with the judge (or its verdict is awaited)
    decided,
    body,
    drain,
    connect_rest,
    answer_due,
    answered,
    done,
    tunnel,
    closed
  };
  enum class Action : uint8_t { pass, status, delay_request, delay_response, reset, truncate, abort_stream };

  struct RequestView {
    std::string host, path, method;
  };
  [[nodiscard]] RequestView request_view() const;
  [[nodiscard]] bool head_matches(const HttpMatch& m, const RequestView& v) const;
  void decide(const HttpRules& rules);
  // After the head: decide now, or first read the body when a fault that
  // counts attempts may take the request (its fingerprint hashes the body).
  void decide_or_collect(const HttpRules& rules);
  [[nodiscard]] bool fault_needs_body(const HttpRules& rules) const;
  void apply_forward_plan();
  void reset_body_stage();
  void make_answer(int status, const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body,
                   bool close);
  void exchange_done();
  void resp_header_done();
  [[nodiscard]] std::string header(std::string_view lower_name) const;

  std::unique_ptr<http_parser> req_;
  std::unique_ptr<http_parser> resp_;
  std::string upstream_host_;
  uint64_t rng_;
  Req state_ = Req::head;
  uint64_t serial_ = 1;
  bool kick_ = false;
  bool judged_ = false;
  bool judge_asked_ = false;
  bool connect_ok_ = false;

  // The request being read.
  std::string head_;
  std::string url_;
  std::vector<std::pair<std::string, std::string>> headers_;  // names lower case
  bool in_value_ = false;
  bool head_complete_ = false;
  bool req_complete_ = false;
  bool upgrade_ = false;
  bool head_method_ = false;
  std::string client_;
  BodyHash body_hash_;  // of the body read in Req::collect

  // The body stage.
  bool collecting_ = false;  // the parser's body bytes go to body_all_ and body_new_
  std::string held_raw_;     // the body's bytes as received (framing included)
  std::string body_all_;     // de-chunked, whole
  std::string body_new_;     // de-chunked, not yet taken
  bool body_end_ = false;
  bool body_over_cap_ = false;
  bool body_held_ = false;  // the body stage ran for this request
  // The client asked `Expect: 100-continue` and the judge wants the body: the
  // proxy says 100 Continue itself (the client would otherwise wait its
  // timeout for a server that is not yet asked), and the Expect field is
  // dropped from the head sent upstream with the body.
  bool continue_due_ = false;
  bool continue_sent_ = false;
  std::vector<std::pair<std::string, std::string>> plan_headers_;
  std::shared_ptr<ByteTransformer> plan_body_;

  // What this exchange does.
  Action action_ = Action::pass;
  uint64_t delay_ms_ = 0;
  bool slept_ = false;
  int64_t limit_ = 0;  // truncate: body bytes; abort_stream: events
  std::string answer_;
  std::deque<std::pair<uint64_t, std::string>> answer_after_;  // a paced answer's pieces still to send
  bool answer_close_ = false;

  // The response being read.
  bool exchange_open_ = false;  // the head went to the server: its response may come
  bool resp_complete_ = false;
  bool resp_slept_ = false;
  bool tunnel_ = false;
  std::string resp_field_;
  std::string resp_value_;
  bool resp_in_value_ = false;
  bool sse_ = false;
  const char* exec_base_ = nullptr;
  size_t cut_at_ = std::string::npos;
  int64_t body_seen_ = 0;
  int64_t events_seen_ = 0;
  size_t line_len_ = 0;
  bool event_has_data_ = false;
};

}  // namespace faultline
