// The proxies of one process: named TCP relays with their toxics, run by io_uring
// workers. This is the contract the Toxiproxy REST API and faultd build on.
//
// Thread safety: every member function may be called from any thread at any time
// except from a worker (user code a worker calls: a transparent proxy's
// original_destination, a forward proxy's RequestJudge; neither may call here). Calls are
// serialised among themselves by one mutex on the control path; the workers never
// take it. A call that changes a proxy returns once every worker has applied the
// change: after remove() or update({.enabled = false}) the listener is closed and
// every connection of the proxy is closed; after a toxic call, every open
// connection of the proxy sees the new toxic set before its next chunk.
//
// Errors map onto Toxiproxy's status codes by Error::err:
//   ENOENT  no such proxy or toxic                    404
//   EEXIST  a proxy or toxic with that name exists    409
//   EINVAL  (bad_input) bad name, address or toxic    400
//   others  the system refused (bind: EADDRINUSE...)   500
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/proxy/endpoint.h"
#include "userspace/proxy/http_fault.h"
#include "userspace/proxy/http_session.h"
#include "userspace/proxy/request_judge.h"
#include "userspace/proxy/toxic.h"

namespace faultline {

// How the workers receive.
enum class ReceiveMode : uint8_t {
  automatic,    // provided buffer rings where the kernel has them, plain otherwise
  buffer_ring,  // provided buffer ring (IORING_REGISTER_PBUF_RING, 5.19); refused if absent
  plain,        // plain recv into two fixed buffers owned by each connection
};

// How the workers accept.
enum class AcceptMode : uint8_t {
  automatic,  // multishot where the kernel has it, one accept request per connection otherwise
  multishot,  // one request for every connection (5.19); refused if absent
  single,     // one accept request per connection
};

struct ProxyOptions {
  unsigned workers = 0;  // io_uring event loops (threads); 0 = one per CPU
  ReceiveMode receive = ReceiveMode::automatic;
  AcceptMode accept = AcceptMode::automatic;
  uint32_t buffer_size = 16384;  // bytes per receive buffer (a chunk is at most this)
  uint32_t ring_buffers = 1024;  // buffers per worker's ring (power of two)
  uint32_t ring_entries = 4096;  // submission queue entries per worker
};

// What the workers run on, decided once at start from io_uring's own probe.
struct ProxyIoPaths {
  bool buffer_ring = false;       // receives use a provided buffer ring
  bool multishot_accept = false;  // one accept request serves every connection
  unsigned workers = 0;
};

// An explicit forward proxy (clients set HTTP_PROXY / HTTPS_PROXY to it): each
// request names where it goes (GET http://host:port/path, CONNECT host:port)
// and is judged before anything leaves (docs/proxy.md, "Forward proxy").
struct ForwardProxy {
  std::shared_ptr<RequestJudge> judge;  // required; shared by every worker (thread-safe)
  // Non-empty: every request must carry exactly this Proxy-Authorization
  // ("Basic dXNlcjpzZWNyZXQ=", "Bearer T"; the scheme's case is free), else it
  // is answered 407 with Proxy-Authenticate before the judge sees it.
  std::string proxy_authorization;
  // Set: every request's Proxy-Authorization (the field's value, "" when
  // absent) is handed to it instead; nothing back is the same 407 (with a
  // Basic challenge), an identity names the request's sender
  // (RequestHead::identity). Runs on a worker: quick, never blocking.
  std::function<std::optional<std::string>(std::string_view authorization)> authenticate;
  // Set: a request in origin-form (made to the proxy itself, not through it:
  // "GET /__faultline/ca.crt") is offered here first, before any
  // authentication; a complete HTTP response is sent as is (and the
  // connection closes), nothing is the usual 400.
  std::function<std::optional<std::string>(std::string_view method, std::string_view target)> own_answer;
};

// A proxy as created or changed. Addresses are "host:port" (IPv6 as "[::1]:80").
// The listen host is resolved when the proxy is (re)started; the upstream is
// never judged then: a name is resolved for each connection, so it may not
// exist yet, and text that is no address makes each connection fail (counted
// in ProxyStats), as in Toxiproxy.
struct ProxyConfig {
  std::string name;      // non-empty, unique
  std::string listen;    // port 0: the kernel picks one (see ProxyInfo::listen_bound)
  std::string upstream;  // where each accepted connection is relayed to
  bool enabled = true;   // false: no listener, no connections (Toxiproxy's "down")

  // A transparent proxy: each accepted connection goes where its client asked to
  // go, which this returns from the accepted socket (the kernel filed it when it
  // redirected the connect; never a guess), and `upstream` is only a label.
  // Nothing: the connection is closed with an RST and counted (unrouted). It runs
  // on a worker thread for every connection: it must be quick and never block.
  std::function<std::optional<SocketAddress>(int accepted_fd)> original_destination;
  // SO_MARK of every connection opened upstream, 0 for none: a redirect exempts
  // the mark (FL_PROXY_MARK), so the proxy is never sent back to itself.
  uint32_t upstream_mark = 0;
  // A forward proxy: `upstream` may be empty (only a label). Connections are
  // parsed as HTTP/1.1 from their first byte; the HTTP faults and TLS
  // (set_http_tls: terminate opens CONNECT tunnels) of the proxy apply to
  // what is forwarded. With original_destination set too, a connection it
  // names a destination for (the kernel redirected it here) is judged
  // transparently instead, and goes nowhere else: plain HTTP per request
  // (origin-form, by its Host), TLS by its SNI (or terminated and judged per
  // inner request), anything else once by that address and port
  // (RequestHead::transparent). Proxy-Authorization is not asked of those.
  std::optional<ForwardProxy> forward;
  // Set: the proxy's own TLS from its first connection (HttpTlsMode::own,
  // set_up_proxy_tls), which puts it in HTTP mode. set_http_tls changes it.
  std::optional<HttpTls> tls;
};

// A partial change: absent members stay. Changing listen or upstream restarts the
// proxy (its connections close, Toxiproxy's behaviour); toxics stay.
struct ProxyUpdate {
  std::optional<std::string> listen;
  std::optional<std::string> upstream;
  std::optional<bool> enabled;
};

struct ProxyInfo {
  ProxyConfig config;
  std::string listen_bound;   // the address listened on ("127.0.0.1:40123"); empty when disabled
  std::vector<Toxic> toxics;  // in the order they were added
  bool http = false;          // HTTP mode (docs/l7.md): on from the proxy's first HTTP fault
  HttpLimits http_limits;
  HttpTls http_tls;                    // what a TLS client meets (docs/tls.md)
  std::vector<HttpFault> http_faults;  // in the order they were added
};

struct ToxicActivations {
  std::string toxic;
  uint64_t connections = 0;  // connections the toxic was applied to (toxicity passed)
};

struct ProxyStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_active = 0;
  uint64_t bytes_upstream = 0;           // client -> server, bytes sent upstream
  uint64_t bytes_downstream = 0;         // server -> client, bytes sent to clients
  uint64_t receives_without_buffer = 0;  // the worker's buffer ring was empty (retried 1 ms later)
  uint64_t connections_unrouted = 0;     // transparent: no original destination was found (closed)
  // Connections closed after accept because the upstream could not be had (as
  // Toxiproxy closes them): its name did not resolve (or is no host:port), or
  // the connect failed; and why the last such connection failed.
  uint64_t upstream_unresolved = 0;
  uint64_t upstream_unreachable = 0;
  std::string last_upstream_failure;
  std::vector<ToxicActivations> toxics;       // every current toxic, in order
  std::vector<ToxicActivations> http_faults;  // every current HTTP fault: the requests it took
};

class ProxyRegistry {
 public:
  // Starts the workers (nothing listens until a proxy is created). Fails when
  // io_uring is unavailable or options.receive cannot be honoured.
  [[nodiscard]] static Result<std::unique_ptr<ProxyRegistry>> start(const ProxyOptions& options);
  ~ProxyRegistry();  // closes every proxy and connection, joins the workers
  ProxyRegistry(const ProxyRegistry&) = delete;
  ProxyRegistry& operator=(const ProxyRegistry&) = delete;

  [[nodiscard]] ProxyIoPaths io_paths() const;

  [[nodiscard]] Result<ProxyInfo> create(const ProxyConfig& config);
  [[nodiscard]] Result<ProxyInfo> get(const std::string& name) const;
  [[nodiscard]] std::vector<ProxyInfo> list() const;  // by name
  [[nodiscard]] Result<ProxyInfo> update(const std::string& name, const ProxyUpdate& change);
  [[nodiscard]] Status remove(const std::string& name);
  void remove_all();  // every proxy, as remove() each
  // Toxiproxy's /reset: every proxy enabled again and every toxic removed.
  [[nodiscard]] Status reset();

  // Toxics of one proxy. add_toxic fails with EEXIST on a taken name; update_toxic
  // replaces the toxic named `toxic` (its name may not change to a taken one).
  [[nodiscard]] Result<Toxic> add_toxic(const std::string& proxy, const Toxic& toxic);
  [[nodiscard]] Result<Toxic> update_toxic(const std::string& proxy, const std::string& toxic,
                                           const Toxic& replacement);
  [[nodiscard]] Status remove_toxic(const std::string& proxy, const std::string& toxic);
  [[nodiscard]] Result<Toxic> get_toxic(const std::string& proxy, const std::string& toxic) const;
  [[nodiscard]] Status clear_toxics(const std::string& proxy);

  // HTTP faults of one proxy (docs/l7.md). The first one (or set_http_limits)
  // puts the proxy in HTTP mode for good: connections accepted from then on are
  // parsed as HTTP/1.1, and each request meets the faults current when its head
  // is complete. add_http_fault fails with EEXIST on a taken name.
  [[nodiscard]] Result<HttpFault> add_http_fault(const std::string& proxy, const HttpFault& fault);
  // Replaces the fault called `fault` (its name may not change to a taken
  // one); its counters carry on, but a changed first_n counts again from 0.
  [[nodiscard]] Result<HttpFault> update_http_fault(const std::string& proxy, const std::string& fault,
                                                    const HttpFault& replacement);
  [[nodiscard]] Status remove_http_fault(const std::string& proxy, const std::string& fault);
  [[nodiscard]] Result<HttpFault> get_http_fault(const std::string& proxy, const std::string& fault) const;
  [[nodiscard]] Status clear_http_faults(const std::string& proxy);
  [[nodiscard]] Status set_http_limits(const std::string& proxy, const HttpLimits& limits);
  // What the proxy does with a connection that opens with a TLS ClientHello
  // (HttpTlsMode); puts it in HTTP mode like the above. Connections accepted
  // from then on see it.
  [[nodiscard]] Status set_http_tls(const std::string& proxy, const HttpTls& tls);

  [[nodiscard]] Result<ProxyStats> stats(const std::string& name) const;

  // A restart's handover. listeners(): each enabled proxy's listening sockets
  // (duplicates, one per worker, in order), for a successor; adopt(): a proxy
  // made on inherited sockets (as many as this registry has workers) with its
  // toxics and HTTP faults and limits (info.listen_bound is ignored);
  // release_listeners(): every proxy stops accepting, leaving the
  // sockets listening for the successor, and keeps its connections, which
  // open_connections() counts down as they close.
  struct Handover {
    ProxyInfo info;
    std::vector<UniqueFd> listeners;
  };
  [[nodiscard]] Result<std::vector<Handover>> listeners() const;
  [[nodiscard]] Result<ProxyInfo> adopt(const ProxyInfo& info, std::vector<UniqueFd> listeners);
  void release_listeners();
  [[nodiscard]] uint64_t open_connections() const;

  class Impl;

 private:
  explicit ProxyRegistry(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace faultline
