// The webhook POST: resolve, connect with a deadline, optional TLS, write the
// request, read the status line.
#include "cp/webhooks/webhook_post.h"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "base/openssl_errors.h"
#include "base/unique_fd.h"

namespace faultline::cp {
namespace {

constexpr size_t kMaxUrl = 2048;

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

Result<UniqueFd> connect_to(const WebhookUrl& url, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(url.port);
  if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return make_error(0, "resolve " + url.host + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, ::freeaddrinfo);
  Error last = make_error(0, "connect " + url.host + ": no address");
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) return errno_error("socket");
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = errno_error("connect " + url.host + ":" + port);
        continue;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      if (::poll(&p, 1, ms_left(deadline)) != 1) {
        last = make_error(ETIMEDOUT, "connect " + url.host + ":" + port);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      (void)::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = make_error(err, "connect " + url.host + ":" + port);
        continue;
      }
    }
    // Blocking from here, each read and write bounded by what is left.
    const int flags = ::fcntl(fd.get(), F_GETFL);
    (void)::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    return fd;
  }
  return last;
}

void bound_io(int fd, Clock::time_point deadline) {
  const int left = std::max(ms_left(deadline), 1);
  timeval tv{left / 1000, (left % 1000) * 1000};
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

// The bytes of a connection, plain or through a TLS session.
struct Channel {
  int fd;
  SSL* ssl = nullptr;
  [[nodiscard]] bool write_all(const std::string& data) const {
    for (size_t at = 0; at < data.size();) {
      const auto n = ssl ? SSL_write(ssl, data.data() + at, static_cast<int>(data.size() - at))
                         : ::send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }
  [[nodiscard]] ssize_t read_some(char* buf, size_t n) const {
    return ssl ? SSL_read(ssl, buf, static_cast<int>(n)) : ::recv(fd, buf, n, 0);
  }
};

}  // namespace

Result<WebhookUrl> parse_webhook_url(const std::string& url) {
  if (url.size() > kMaxUrl) return input_error(0, "is over 2048 characters");
  WebhookUrl out;
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
    out.port = 80;
  } else if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
    out.tls = true;
    out.port = 443;
  } else {
    return input_error(0, "must start with http:// or https://");
  }
  for (char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return input_error(0, "has a space or a control character");
  if (url.find('#') != std::string::npos) return input_error(0, "has a fragment (#)");
  const size_t slash = rest.find_first_of("/?");
  std::string authority = rest.substr(0, slash);
  out.path = slash == std::string::npos ? "/" : rest.substr(slash);
  if (out.path[0] == '?') out.path = "/" + out.path;
  if (authority.find('@') != std::string::npos) return input_error(0, "has user information (@)");
  std::string port;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return input_error(0, "has an IPv6 address without its ]");
    out.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return input_error(0, "has something after the IPv6 address");
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return input_error(0, "has no host");
  if (out.host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") !=
      std::string::npos)
    return input_error(0, "has a host with characters a host name cannot have");
  if (!port.empty() || authority.find(':') != std::string::npos) {
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      return input_error(0, "has a port that is not 1-65535");
    out.port = static_cast<uint16_t>(std::stoi(port));
  }
  return out;
}

Result<int> post_webhook(const WebhookUrl& url, const std::vector<std::pair<std::string, std::string>>& headers,
                         const std::string& body, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto fd = connect_to(url, deadline);
  if (!fd) return fd.error();
  bound_io(fd->get(), deadline);
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(nullptr, SSL_CTX_free);
  std::unique_ptr<SSL, void (*)(SSL*)> ssl(nullptr, SSL_free);
  Channel ch{fd->get()};
  if (url.tls) {
    ctx.reset(SSL_CTX_new(TLS_client_method()));
    if (!ctx) return make_error(0, with_openssl_errors("SSL_CTX_new"));
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1)
      return make_error(0, with_openssl_errors("the system's CA store"));
    ssl.reset(SSL_new(ctx.get()));
    if (!ssl) return make_error(0, with_openssl_errors("SSL_new"));
    SSL_set_fd(ssl.get(), fd->get());
    SSL_set_tlsext_host_name(ssl.get(), url.host.c_str());
    if (SSL_set1_host(ssl.get(), url.host.c_str()) != 1) return make_error(0, with_openssl_errors("SSL_set1_host"));
    if (SSL_connect(ssl.get()) != 1) return make_error(0, with_openssl_errors("TLS with " + url.host));
    ch.ssl = ssl.get();
  }
  const bool v6 = url.host.find(':') != std::string::npos;
  std::string req = "POST " + url.path + " HTTP/1.1\r\nHost: " + (v6 ? "[" + url.host + "]" : url.host) + ":" +
                    std::to_string(url.port) +
                    "\r\nUser-Agent: faultcp\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    "Content-Length: " +
                    std::to_string(body.size()) + "\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  req += "\r\n" + body;
  if (!ch.write_all(req)) return make_error(errno ? errno : EPIPE, "send to " + url.host);
  // "HTTP/1.1 200 ...": the first line is all we need.
  std::string head;
  char buf[512];
  while (head.find("\r\n") == std::string::npos && head.size() < 4096) {
    const auto n = ch.read_some(buf, sizeof(buf));
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  if (head.size() < 12 || head.rfind("HTTP/1.", 0) != 0 || head.find_first_not_of("0123456789", 9) != 12)
    return make_error(head.empty() ? ETIMEDOUT : 0, "no HTTP status line from " + url.host);
  if (ssl) (void)SSL_shutdown(ssl.get());
  return std::stoi(head.substr(9, 3));
}

}  // namespace faultline::cp
