// The TLS tier's fixture: a blocking-socket, poll-driven pairing of two
// TlsSessions (the io_uring relay does the same with completions).
#include "selftests/tls/tls_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "userspace/proxy/tls_client_hello.h"

namespace fltest {
namespace {

using faultline::TlsSession;
using faultline::TlsState;
using faultline::UniqueFd;

constexpr const char* kUpstreamScript = R"PY(
import http.server, ssl, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self, body):
        print("REQ", self.command, self.path, flush=True)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self.answer(("hello from upstream " + self.path).encode())
    def do_POST(self):
        self.answer(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
    def log_message(self, *args):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("PORT", srv.server_address[1], flush=True)
srv.serve_forever()
)PY";

bool write_all_fd(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// One read: bytes, "" at EOF or error (eof set), nothing yet on timeout.
std::optional<std::string> read_some(int fd, int timeout_ms, bool& eof) {
  pollfd p{fd, POLLIN, 0};
  const int r = ::poll(&p, 1, timeout_ms);
  if (r <= 0) return std::nullopt;
  char buf[16384];
  ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
  if (n <= 0) {
    eof = true;
    return std::string();
  }
  return std::string(buf, static_cast<size_t>(n));
}

UniqueFd connect_to(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return UniqueFd();
  return fd;
}

}  // namespace

TempDir::TempDir() {
  char tmpl[] = "/tmp/fl-tls-test.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string private_key_pem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

std::string pinned_pubkey(X509* cert) {
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(X509_get0_pubkey(cert), &der);
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(der, static_cast<size_t>(len), md);
  OPENSSL_free(der);
  unsigned char b64[64];
  EVP_EncodeBlock(b64, md, sizeof(md));
  return "sha256//" + std::string(reinterpret_cast<char*>(b64));
}

HttpsUpstream::HttpsUpstream(const TempDir& dir, const std::string& cert_pem, const std::string& key_pem)
    : child_([&] {
        write_file(dir.file("upstream.pem"), cert_pem);
        write_file(dir.file("upstream.key"), key_pem);
        write_file(dir.file("upstream.py"), kUpstreamScript);
        return ChildProcess::spawn(
            {"python3", dir.file("upstream.py"), dir.file("upstream.pem"), dir.file("upstream.key")},
            SpawnOptions{.merge_stderr = true});
      }()) {
  if (auto line = child_.wait_line_starting("PORT ", 10s)) port_ = static_cast<uint16_t>(std::stoi(line->substr(5)));
}

int HttpsUpstream::requests() {
  const std::string& out = child_.out();
  int n = 0;
  for (size_t at = out.find("REQ "); at != std::string::npos; at = out.find("REQ ", at + 1)) ++n;
  return n;
}

LoopbackTerminator::LoopbackTerminator(std::shared_ptr<faultline::TlsServerContext> server,
                                       std::shared_ptr<faultline::TlsClientContext> client, uint16_t upstream_port)
    : server_(std::move(server)), client_(std::move(client)), upstream_port_(upstream_port) {
  listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof(a);
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listener_.get(), 64) != 0 ||
      ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&a), &alen) != 0)
    throw std::runtime_error("cannot listen on loopback");
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

LoopbackTerminator::~LoopbackTerminator() {
  stop_ = true;
  ::shutdown(listener_.get(), SHUT_RDWR);
  acceptor_.join();
  for (auto& t : workers_) t.join();
}

void LoopbackTerminator::accept_loop() {
  while (!stop_) {
    pollfd p{listener_.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c) continue;
    std::lock_guard lock(mu_);
    workers_.emplace_back([this, fd = std::move(c)]() mutable { serve(std::move(fd)); });
  }
}

void LoopbackTerminator::record_error(const std::string& e) {
  std::lock_guard lock(mu_);
  errors_.push_back(e);
}

std::vector<std::string> LoopbackTerminator::errors() {
  std::lock_guard lock(mu_);
  return errors_;
}

std::vector<std::string> LoopbackTerminator::alpns() {
  std::lock_guard lock(mu_);
  return alpns_;
}

bool LoopbackTerminator::wait_error(const std::string& needle) {
  for (int i = 0; i < 100; ++i) {
    for (const auto& e : errors())
      if (e.find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void LoopbackTerminator::serve(UniqueFd client) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // 1. The ClientHello, read without decrypting: the name to connect to and verify.
  std::string hello_bytes;
  faultline::ClientHelloScan scan;
  bool eof = false;
  while (scan.status == faultline::ClientHelloStatus::kNeedMore) {
    if (eof || stop_ || std::chrono::steady_clock::now() > deadline) return record_error("client: no ClientHello");
    if (auto b = read_some(client.get(), 100, eof)) hello_bytes += *b;
    scan = faultline::scan_client_hello(std::span<const uint8_t>(
        reinterpret_cast<const uint8_t*>(hello_bytes.data()), hello_bytes.size()));
  }
  if (scan.status != faultline::ClientHelloStatus::kParsed)
    return record_error(std::string("client: ") + client_hello_status_name(scan.status) + ": " + scan.error);
  const std::string host = scan.hello.server_name.empty() ? "127.0.0.1" : scan.hello.server_name;

  // 2. The upstream, verified for that name before the client hears a word.
  UniqueFd up = connect_to(upstream_port_);
  if (!up) return record_error("upstream: connect failed");
  auto upstream = TlsSession::client(client_, host);
  if (!upstream) return record_error(upstream.error().describe());
  TlsSession& u = **upstream;
  while (u.state() == TlsState::kHandshaking && !stop_ && std::chrono::steady_clock::now() < deadline) {
    if (!write_all_fd(up.get(), u.take_ciphertext())) break;
    bool up_eof = false;
    if (auto b = read_some(up.get(), 100, up_eof)) {
      if (up_eof) u.peer_eof();
      else (void)u.feed_ciphertext(*b);
    }
  }
  if (u.state() != TlsState::kEstablished) {
    (void)write_all_fd(up.get(), u.take_ciphertext());  // our alert to the upstream
    record_error(u.state() == TlsState::kFailed ? u.error() : "upstream " + host + ": handshake did not finish");
    // Fail closed: the client gets a fatal alert, never a connection to an unverified peer.
    (void)write_all_fd(client.get(), faultline::tls_handshake_failure_alert());
    return;
  }

  // 3. The client's handshake, with a leaf for its SNI; then plaintext both ways.
  auto downstream = TlsSession::server(server_, "127.0.0.1");
  if (!downstream) return record_error(downstream.error().describe());
  TlsSession& d = **downstream;
  (void)d.feed_ciphertext(hello_bytes);
  bool client_eof = false, up_eof = false;
  bool alpn_recorded = false;
  while (!stop_ && std::chrono::steady_clock::now() < deadline) {
    // Move what each side decrypted to the other, and every pending record out.
    if (d.established() && !alpn_recorded) {
      std::lock_guard lock(mu_);
      alpns_.push_back(d.alpn());
      alpn_recorded = true;
    }
    if (std::string p = d.take_plaintext(); !p.empty()) (void)u.send_plaintext(p);
    if (std::string p = u.take_plaintext(); !p.empty()) (void)d.send_plaintext(p);
    if (d.state() == TlsState::kClosed || client_eof) u.close();
    if (u.state() == TlsState::kClosed || up_eof) d.close();
    const bool wrote = write_all_fd(client.get(), d.take_ciphertext()) && write_all_fd(up.get(), u.take_ciphertext());
    if (d.state() == TlsState::kFailed) {
      record_error(d.error());
      return;
    }
    if (u.state() == TlsState::kFailed) {
      record_error(u.error());
      return;
    }
    if (!wrote || (client_eof && up_eof) || (d.state() == TlsState::kClosed && u.state() == TlsState::kClosed)) return;
    pollfd p[2] = {{client.get(), static_cast<short>(client_eof ? 0 : POLLIN), 0},
                   {up.get(), static_cast<short>(up_eof ? 0 : POLLIN), 0}};
    if (::poll(p, 2, 100) <= 0) continue;
    char buf[16384];
    if (p[0].revents != 0) {
      ssize_t n = ::recv(client.get(), buf, sizeof(buf), 0);
      if (n <= 0) {
        client_eof = true;
        d.peer_eof();
      } else {
        (void)d.feed_ciphertext(std::string_view(buf, static_cast<size_t>(n)));
      }
    }
    if (p[1].revents != 0) {
      ssize_t n = ::recv(up.get(), buf, sizeof(buf), 0);
      if (n <= 0) {
        up_eof = true;
        u.peer_eof();
      } else {
        (void)u.feed_ciphertext(std::string_view(buf, static_cast<size_t>(n)));
      }
    }
  }
}

}  // namespace fltest
