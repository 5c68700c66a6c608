// The Postgres gate of `faultctl guard --pg-listen ADDR --pg-upstream H:P`: a
// listener on loopback, one thread per client connection relaying to the
// server through a PgSession (userspace/guard/pg_session.h), judged by the
// request guard's policy, approvals and activity log.
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/guard/guard_judge.h"
#include "userspace/guard/pg_session.h"
#include "userspace/proxy/endpoint.h"

struct ssl_ctx_st;

namespace faultline {

struct PgGateOptions {
  std::string listen;    // --pg-listen: "127.0.0.1:5432" ("127.0.0.1:0": any free port)
  std::string upstream;  // --pg-upstream: "db.internal:5432"
  enum class SslMode : uint8_t { Disable, Require, VerifyFull } sslmode = SslMode::Disable;  // --pg-upstream-sslmode
  std::string ca_file;  // --pg-upstream-ca: the CA for verify-full ("": the system's trust store)
  size_t max_message = 16u << 20;
  [[nodiscard]] bool enabled() const { return !listen.empty(); }
};

// "disable", "require", "verify-full" (libpq's words); else an error naming the choices.
[[nodiscard]] Result<PgGateOptions::SslMode> parse_pg_sslmode(std::string_view text);

struct PgGateCounts {
  uint64_t connections = 0, statements = 0, allowed = 0, denied = 0, held = 0, approved = 0, would_deny = 0,
           would_hold = 0;
};

class GuardPgGate {
 public:
  // Binds the listener (a loopback address only) and resolves the upstream;
  // the judge must outlive the gate.
  [[nodiscard]] static Result<std::unique_ptr<GuardPgGate>> start(const PgGateOptions& options, GuardJudge& judge,
                                                                  std::ostream& log);
  ~GuardPgGate();  // stops accepting, ends every connection, joins the threads
  GuardPgGate(const GuardPgGate&) = delete;
  GuardPgGate& operator=(const GuardPgGate&) = delete;

  // PGHOST and PGPORT for the command.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> env() const;
  [[nodiscard]] const std::string& address() const { return address_; }  // "127.0.0.1:5432"
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] const SocketAddress& upstream() const { return upstream_addr_; }
  [[nodiscard]] PgGateCounts counts() const;
  void print_summary(std::ostream& log) const;

 private:
  struct Conn;
  GuardPgGate(GuardJudge& judge, std::ostream& log) : judge_(judge), log_(log) {}
  void accept_loop();
  void serve(const std::shared_ptr<Conn>& c);
  // Writes what a session said to do, records what it judged; under c's lock.
  bool apply(Conn& c, const std::shared_ptr<Conn>& self, PgOutput out);
  // One stderr line and one activity line per statement; the counts.
  void record(const Conn& c, const PgJudged& j);
  void say(const std::string& line);
  // Asks the upstream for TLS (SSLRequest) and shakes hands; an error's text for the client's FATAL.
  Status upstream_tls(Conn& c);
  // To the server: TLS when --pg-upstream-sslmode asked for it. Under c's lock.
  bool send_server(Conn& c, std::string_view data);
  // A FATAL for a client whose upstream could not be had, after 'N' to its SSLRequest or GSSENCRequest.
  void refuse_client(Conn& c, const std::string& code, const std::string& message);
  // What the TLS upstream sent, decrypted and through the session, until it has no more; false: the end.
  bool read_server_tls(const std::shared_ptr<Conn>& self, std::string& buf);

  PgGateOptions options_;
  GuardJudge& judge_;
  std::ostream& log_;
  std::mutex log_mu_;
  std::string address_;
  uint16_t port_ = 0;
  std::string upstream_text_;
  SocketAddress upstream_addr_;
  std::shared_ptr<ssl_ctx_st> tls_;  // the upstream TLS context (sslmode require, verify-full)
  std::shared_ptr<PgCancelKeys> cancel_keys_ = std::make_shared<PgCancelKeys>();
  UniqueFd listener_;
  UniqueFd stop_;  // an eventfd: written once to stop every loop
  std::atomic<bool> stopping_{false};
  std::mutex conns_mu_;
  std::list<std::pair<std::shared_ptr<Conn>, std::thread>> conns_;
  std::thread acceptor_;
  std::atomic<uint64_t> next_hold_{0};
  struct AtomicCounts {
    std::atomic<uint64_t> connections{0}, statements{0}, allowed{0}, denied{0}, held{0}, approved{0}, would_deny{0},
        would_hold{0};
  } counts_;
};

}  // namespace faultline
