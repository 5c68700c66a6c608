// The TLS tier's fixture: TlsTermination driven by poll() on blocking sockets
// (the io_uring relay does the same with completions).
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

#include "userspace/proxy/tls_termination.h"

namespace fltest {
namespace {

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
  faultline::TlsTermination t(server_, client_, "127.0.0.1");
  using Phase = faultline::TlsTermination::Phase;
  UniqueFd up;
  bool alpn_recorded = false;
  char buf[16384];
  while (!stop_ && std::chrono::steady_clock::now() < deadline) {
    if (t.phase() == Phase::kConnectUpstream) {
      up = connect_to(upstream_port_);
      if (!up) return record_error("upstream: connect failed");
      (void)t.upstream_connected();
    }
    if (t.phase() == Phase::kEstablished) {
      if (!alpn_recorded) {
        std::lock_guard lock(mu_);
        alpns_.push_back(t.client_alpn());
        alpn_recorded = true;
      }
      // No HTTP layer here: plaintext passes as it is.
      if (std::string p = t.take_from_client(); !p.empty()) (void)t.send_to_upstream(p);
      if (std::string p = t.take_from_upstream(); !p.empty()) (void)t.send_to_client(p);
      if (t.client_done()) t.close_upstream();
      if (t.upstream_done()) t.close_client();
    }
    const bool wrote = write_all_fd(client.get(), t.to_client()) && (!up || write_all_fd(up.get(), t.to_upstream()));
    if (t.phase() == Phase::kFailed) return record_error(t.error());
    if (t.phase() == Phase::kNotTls) return record_error(t.error());
    if (!wrote || (t.client_done() && t.upstream_done())) return;
    pollfd p[2] = {{client.get(), static_cast<short>(t.client_done() ? 0 : POLLIN), 0},
                   {up ? up.get() : -1, static_cast<short>(t.upstream_done() ? 0 : POLLIN), 0}};
    if (::poll(p, 2, 100) <= 0) continue;
    if (p[0].revents != 0) {
      ssize_t n = ::recv(client.get(), buf, sizeof(buf), 0);
      if (n <= 0)
        t.client_eof();
      else
        (void)t.from_client(std::string_view(buf, static_cast<size_t>(n)));
    }
    if (up && p[1].revents != 0) {
      ssize_t n = ::recv(up.get(), buf, sizeof(buf), 0);
      if (n <= 0)
        t.upstream_eof();
      else
        (void)t.from_upstream(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
}

}  // namespace fltest
