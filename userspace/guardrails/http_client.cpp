// The blocking GET: a non-blocking socket polled against one deadline, TLS
// through OpenSSL on the same socket, the response read by HttpResponseReader.
#include "userspace/guardrails/http_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>

#include <cstring>

#include "base/clock.h"
#include "base/openssl_errors.h"
#include "base/unique_fd.h"
#include "base/units.h"

namespace faultline {
namespace {

struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// One connection: a socket, TLS on it if asked, and the deadline everything waits against.
class Connection {
 public:
  Connection(UniqueFd fd, uint64_t deadline, uint64_t timeout, int cancel_fd)
      : fd_(std::move(fd)), deadline_(deadline), timeout_(timeout), cancel_fd_(cancel_fd) {}

  // Waits for the socket; false at the deadline or once the cancel fd is readable.
  bool wait(short events) {
    for (;;) {
      uint64_t now = monotonic_ns();
      if (now >= deadline_) return false;
      pollfd p[2] = {{fd_.get(), events, 0}, {cancel_fd_, POLLIN, 0}};
      int left_ms = static_cast<int>((deadline_ - now + 999'999) / 1'000'000);
      int rc = ::poll(p, cancel_fd_ >= 0 ? 2 : 1, left_ms);
      if (rc > 0 && cancel_fd_ >= 0 && (p[1].revents & POLLIN)) {
        cancelled_ = true;
        return false;
      }
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) return false;
    }
  }
  Error late(const std::string& stage) const {
    if (cancelled_) return make_error(ECANCELED, stage + ": cancelled");
    return make_error(ETIMEDOUT, stage + " within " + format_duration(timeout_));
  }

  Status connect(const sockaddr* addr, socklen_t len, const std::string& where) {
    if (::connect(fd_.get(), addr, len) != 0 && errno != EINPROGRESS) return errno_error("connect to " + where);
    if (!wait(POLLOUT)) return late("no connection to " + where);
    int soerr = 0;
    socklen_t l = sizeof(soerr);
    ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &soerr, &l);
    if (soerr != 0) return make_error(soerr, "connect to " + where);
    return {};
  }

  Status handshake(SSL_CTX* ctx, const std::string& host) {
    ssl_.reset(SSL_new(ctx));
    if (!ssl_) return make_error(ENOMEM, with_openssl_errors("TLS"));
    SSL_set_fd(ssl_.get(), fd_.get());
    if (is_ip_literal(host)) {
      // No SNI for an address (RFC 6066 3); the certificate must name the address.
      if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), host.c_str()) != 1)
        return make_error(EINVAL, "TLS: cannot verify against the address " + host);
    } else {
      SSL_set_tlsext_host_name(ssl_.get(), host.c_str());
      SSL_set_hostflags(ssl_.get(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      if (SSL_set1_host(ssl_.get(), host.c_str()) != 1) return make_error(EINVAL, "TLS: cannot verify against " + host);
    }
    for (;;) {
      ERR_clear_error();
      int rc = SSL_connect(ssl_.get());
      if (rc == 1) return {};
      int e = SSL_get_error(ssl_.get(), rc);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        if (!wait(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) return late("no TLS handshake");
        continue;
      }
      long verify = SSL_get_verify_result(ssl_.get());
      if (verify != X509_V_OK)
        return make_error(0, std::string("TLS: certificate verify failed: ") + X509_verify_cert_error_string(verify));
      return make_error(0, with_openssl_errors("TLS handshake failed"));
    }
  }

  Status send_all(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n;
      int want = POLLOUT;
      if (ssl_) {
        ERR_clear_error();
        int rc = SSL_write(ssl_.get(), data.data() + sent, static_cast<int>(data.size() - sent));
        n = rc;
        if (rc <= 0) {
          int e = SSL_get_error(ssl_.get(), rc);
          if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return make_error(0, with_openssl_errors("TLS write"));
          want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
          n = 0;
        }
      } else {
        n = ::send(fd_.get(), data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) return errno_error("send");
      }
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (!wait(static_cast<short>(want))) return late("request not sent");
    }
    return {};
  }

  // Some bytes (true), the peer's close (false), or an error.
  Result<bool> recv_some(std::string& into) {
    char buf[16384];
    for (;;) {
      int want = POLLIN;
      if (ssl_) {
        ERR_clear_error();
        int rc = SSL_read(ssl_.get(), buf, sizeof(buf));
        if (rc > 0) {
          into.assign(buf, static_cast<size_t>(rc));
          return true;
        }
        int e = SSL_get_error(ssl_.get(), rc);
        if (e == SSL_ERROR_ZERO_RETURN) return false;
        if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) return false;  // closed without close_notify
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
          return make_error(0, with_openssl_errors("TLS read"));
        want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      } else {
        ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
        if (n > 0) {
          into.assign(buf, static_cast<size_t>(n));
          return true;
        }
        if (n == 0) return false;
        if (errno != EAGAIN && errno != EINTR) return errno_error("recv");
      }
      if (!wait(static_cast<short>(want))) return late("no whole response");
    }
  }

 private:
  UniqueFd fd_;
  uint64_t deadline_, timeout_;
  int cancel_fd_ = -1;
  bool cancelled_ = false;
  std::unique_ptr<SSL, SslFree> ssl_;
};

}  // namespace

Result<HttpClient> HttpClient::create(HttpClientOptions o) {
  HttpClient c(std::move(o));
  if (!c.o_.tls) return c;
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return make_error(ENOMEM, with_openssl_errors("TLS"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  // Many servers close without a close_notify; a body framed by its length or
  // chunks is still checked for truncation by the reader.
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (c.o_.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1)
      return make_error(ENOENT, with_openssl_errors("TLS: cannot load the system trust store"));
  } else if (SSL_CTX_load_verify_locations(ctx.get(), c.o_.ca_file.c_str(), nullptr) != 1) {
    return input_error(EINVAL,
                       with_openssl_errors(c.o_.ca_flag + " " + c.o_.ca_file + ": no PEM certificate could be loaded"));
  }
  ERR_clear_error();
  c.tls_ = std::move(ctx);
  return c;
}

Result<HttpAnswer> HttpClient::get(const HttpUrl& url, uint64_t timeout_ns) const {
  return call(url, HttpCall{}, timeout_ns);
}

Result<HttpAnswer> HttpClient::call(const HttpUrl& url, const HttpCall& what, uint64_t timeout_ns) const {
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = start + timeout_ns;
  if (url.tls && !tls_) return make_error(EINVAL, "https URL given to a client made without TLS");

  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(url.port);
  if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return make_error(rc == EAI_SYSTEM ? errno : 0, "cannot resolve " + url.host + ": " + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addrs(res, ::freeaddrinfo);

  // Every address of the name in turn (localhost is ::1 and 127.0.0.1), until one connects.
  std::optional<Connection> conn;
  Error last = make_error(EHOSTUNREACH, "no address for " + url.host);
  for (const addrinfo* a = addrs.get(); a != nullptr && !conn; a = a->ai_next) {
    UniqueFd sock;
    {
      std::optional<NetnsEnter> inside;
      if (o_.netns) {
        auto in = NetnsEnter::enter(*o_.netns);
        if (!in) return in.error();
        inside.emplace(std::move(*in));
      }
      sock.reset(::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    }
    if (!sock) return errno_error("socket");
    char host[NI_MAXHOST] = "?";
    ::getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
    std::string where =
        a->ai_family == AF_INET6 ? "[" + std::string(host) + "]:" + port : std::string(host) + ":" + port;
    Connection c(std::move(sock), deadline, timeout_ns, what.cancel_fd);
    if (auto st = c.connect(a->ai_addr, a->ai_addrlen, where); !st) {
      last = st.error();
      if (last.err == ETIMEDOUT) return last;
      continue;
    }
    conn.emplace(std::move(c));
  }
  if (!conn) return last;
  if (url.tls) FL_TRY(conn->handshake(tls_.get(), url.host));

  // Accept: */* unless the caller names what it accepts (a second Accept
  // field would be read first-wins by some servers, ours included).
  bool accept_given = false;
  for (const auto& h : what.headers) accept_given = accept_given || strcasecmp(h.first.c_str(), "accept") == 0;
  std::string req = what.method + " " + url.path + " HTTP/1.1\r\nHost: " + url.host_header() +
                    "\r\nUser-Agent: faultline\r\n" + (accept_given ? "" : "Accept: */*\r\n") + "Connection: close\r\n";
  for (const auto& [name, value] : what.headers) req += name + ": " + value + "\r\n";
  if (!what.body.empty() || what.method == "POST" || what.method == "PUT")
    req += "Content-Length: " + std::to_string(what.body.size()) + "\r\n";
  req += "\r\n";
  req += what.body;
  FL_TRY(conn->send_all(req));

  HttpResponseReader reader(HttpResponseReader::Limits{.max_head = 64 * 1024, .max_body = o_.max_body});
  std::string chunk;
  for (;;) {
    auto got = conn->recv_some(chunk);
    if (!got) return got.error();
    if (!*got) {
      if (auto st = reader.close(); !st) return make_error(0, st.error().message);
      break;
    }
    auto done = reader.feed(chunk);
    if (!done) return make_error(0, "bad response: " + done.error().message);
    if (*done) break;
  }
  return HttpAnswer{reader.take(), monotonic_ns() - start};
}

}  // namespace faultline
