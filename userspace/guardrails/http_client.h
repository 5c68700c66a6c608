// A small blocking HTTP/1.1 GET client with one deadline for the whole exchange
// (resolve, connect, TLS handshake, request, the whole response), over TCP or
// TLS. The health probe and the Prometheus guardrails share it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "loader/netns.h"
#include "userspace/guardrails/http.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace faultline {

struct HttpClientOptions {
  // Make a TLS context, for https:// URLs: the system trust store (OpenSSL's
  // default paths, SSL_CERT_FILE/SSL_CERT_DIR honoured), or only ca_file.
  bool tls = false;
  std::string ca_file;                  // PEM; the one CA trusted instead of the system store
  std::string ca_flag = "--health-ca";  // names ca_file in errors
  std::optional<NetnsRef> netns;        // the socket is made in this namespace; else in ours
  size_t max_body = 4 * 1024 * 1024;
};

// One request of any method (the control plane's agent and client POST JSON).
struct HttpCall {
  std::string method = "GET";
  std::vector<std::pair<std::string, std::string>> headers;  // added after Host
  std::string body;                                          // sent with Content-Length when not empty
  // Readable: the call gives up at once (ECANCELED), e.g. a long poll at a stop.
  int cancel_fd = -1;
};

struct HttpAnswer {
  HttpResponse response;
  uint64_t latency_ns = 0;  // from the start of the call to the whole response
};

class HttpClient {
 public:
  // With tls, loads the trust store now: a --health-ca FILE that cannot be read
  // or holds no certificate is bad input, said before anything runs.
  [[nodiscard]] static Result<HttpClient> create(HttpClientOptions o);

  // One GET, "Connection: close", finished within timeout_ns or an error
  // (ETIMEDOUT naming the stage that was late). TLS: SNI for names, and the
  // certificate must match the URL's host (a name, or an IP address in its
  // subjectAltName) and chain to the trust store; there is no way to turn that off.
  // An answer of any status is an answer: the caller judges it.
  [[nodiscard]] Result<HttpAnswer> get(const HttpUrl& url, uint64_t timeout_ns) const;
  // The same for any method, headers and body; url.path carries the target.
  [[nodiscard]] Result<HttpAnswer> call(const HttpUrl& url, const HttpCall& what, uint64_t timeout_ns) const;

  [[nodiscard]] const HttpClientOptions& options() const { return o_; }

 private:
  explicit HttpClient(HttpClientOptions o) : o_(std::move(o)) {}
  HttpClientOptions o_;
  std::shared_ptr<ssl_ctx_st> tls_;
};

}  // namespace faultline
