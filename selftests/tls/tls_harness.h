// The TLS tier's fixture: a terminator on loopback sockets driving
// TlsTermination as the relay would (the ClientHello scanned, the upstream
// verified first, then the client's handshake with a minted leaf), and an
// HTTPS upstream (python3) with a certificate of a test CA.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "selftests/lib/child_process.h"
#include "userspace/proxy/tls_ca.h"
#include "userspace/proxy/tls_session.h"

namespace fltest {

// A private folder under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& text);
// The PEM of a private key (the leaf's, for the upstream's files).
[[nodiscard]] std::string private_key_pem(evp_pkey_st* key);
// curl's --pinnedpubkey form of a certificate's key: "sha256//BASE64".
[[nodiscard]] std::string pinned_pubkey(x509_st* cert);

// python3's ThreadingHTTPServer over TLS on 127.0.0.1: GET answers "hello from
// upstream PATH", POST echoes the body; each request is counted.
class HttpsUpstream {
 public:
  // cert_pem, key_pem: the server's certificate and key.
  HttpsUpstream(const TempDir& dir, const std::string& cert_pem, const std::string& key_pem);
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] bool started() const { return port_ != 0; }
  // Requests served so far (the lines "REQ ..." it printed).
  [[nodiscard]] int requests();
  [[nodiscard]] std::string describe() { return child_.describe(); }

 private:
  ChildProcess child_;
  uint16_t port_ = 0;
};

// The terminator on 127.0.0.1:port(): every connection is scanned, its upstream
// (127.0.0.1:upstream_port, verified for the client's SNI) connected and
// handshaken, then the client's handshake completed and plaintext relayed. A
// refused upstream sends the client a handshake_failure alert; every refusal is
// kept in errors().
class LoopbackTerminator {
 public:
  LoopbackTerminator(std::shared_ptr<faultline::TlsServerContext> server,
                     std::shared_ptr<faultline::TlsClientContext> client, uint16_t upstream_port);
  ~LoopbackTerminator();
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] std::vector<std::string> errors();
  // Waits up to 5 s for an error containing `needle`.
  [[nodiscard]] bool wait_error(const std::string& needle);
  [[nodiscard]] std::vector<std::string> alpns();  // negotiated with each client

 private:
  void accept_loop();
  void serve(faultline::UniqueFd client);
  void record_error(const std::string& e);

  std::shared_ptr<faultline::TlsServerContext> server_;
  std::shared_ptr<faultline::TlsClientContext> client_;
  uint16_t upstream_port_;
  faultline::UniqueFd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> errors_;
  std::vector<std::string> alpns_;
  std::vector<std::thread> workers_;
  std::thread acceptor_;
};

}  // namespace fltest
