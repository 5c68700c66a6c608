// One thread accepts, one thread per connection relays (poll on both sockets
// and the stop eventfd); an approval's decision writes from the queue's
// thread under the connection's lock.
#include "ctl/guard_pg_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ostream>

#include "base/openssl_errors.h"

namespace faultline {

struct GuardPgGate::Conn {
  std::mutex mu;  // the session, the writes, the hold
  UniqueFd client;
  UniqueFd server;
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl{nullptr, SSL_free};  // over server, with --pg-upstream-sslmode
  std::unique_ptr<PgSession> session;
  uint64_t hold_id = 0;  // the approval queue's request id while a message is held
  std::string peer;
  bool done = false;  // the thread ended (joined by the acceptor or the destructor)
  bool closed = false;
};

namespace guard_pg_gate_detail {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(size_t(n));
  }
  return true;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

bool loopback(const SocketAddress& a) {
  if (a.family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a.get())->sin_addr.s_addr) >> 24) == 127;
  if (a.family() == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a.get())->sin6_addr);
  return false;
}

}  // namespace guard_pg_gate_detail

using namespace guard_pg_gate_detail;

Result<PgGateOptions::SslMode> parse_pg_sslmode(std::string_view text) {
  if (text == "disable") return PgGateOptions::SslMode::Disable;
  if (text == "require") return PgGateOptions::SslMode::Require;
  if (text == "verify-full") return PgGateOptions::SslMode::VerifyFull;
  return input_error(EINVAL, "'" + std::string(text) + "': one of disable, require, verify-full");
}

Result<std::unique_ptr<GuardPgGate>> GuardPgGate::start(const PgGateOptions& options, GuardJudge& judge,
                                                        std::ostream& log) {
  std::unique_ptr<GuardPgGate> g(new GuardPgGate(judge, log));
  g->options_ = options;
  auto hp = split_endpoint(options.listen, "--pg-listen");
  if (!hp) return hp.error();
  auto at = numeric_socket_address(hp->host, hp->port);
  if (!at || !loopback(*at))
    return input_error(EINVAL, "--pg-listen " + options.listen +
                                   ": a loopback address and port (127.0.0.1:5432): the gate serves the "
                                   "guarded command only");
  auto up = resolve_endpoint(options.upstream, "--pg-upstream");
  if (!up) return up.error();
  g->upstream_addr_ = *up;
  g->upstream_text_ = options.upstream;
  if (options.sslmode != PgGateOptions::SslMode::Disable) {
    std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
    if (!ctx) return make_error(ENOMEM, with_openssl_errors("--pg-upstream-sslmode: TLS"));
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    if (options.sslmode == PgGateOptions::SslMode::VerifyFull) {
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
      if (options.ca_file.empty()) {
        if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1)
          return make_error(ENOENT, with_openssl_errors("--pg-upstream-sslmode verify-full: the system trust store"));
      } else if (SSL_CTX_load_verify_locations(ctx.get(), options.ca_file.c_str(), nullptr) != 1) {
        return input_error(EINVAL, with_openssl_errors("--pg-upstream-ca " + options.ca_file +
                                                       ": no PEM certificate could be loaded"));
      }
    } else {
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);  // require: encrypted, the server not checked
    }
    ERR_clear_error();
    g->tls_ = std::move(ctx);
  }
  g->listener_ = UniqueFd(::socket(at->family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!g->listener_) return make_error(errno, "--pg-listen: socket");
  const int one = 1;
  (void)::setsockopt(g->listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(g->listener_.get(), at->get(), at->length) != 0)
    return make_error(errno, "--pg-listen " + options.listen + ": bind");
  if (::listen(g->listener_.get(), 128) != 0) return make_error(errno, "--pg-listen: listen");
  auto bound = local_address(g->listener_.get());
  if (!bound) return bound.error();
  g->address_ = endpoint_text(*bound);
  g->port_ = ntohs(bound->family() == AF_INET ? reinterpret_cast<const sockaddr_in*>(bound->get())->sin_port
                                              : reinterpret_cast<const sockaddr_in6*>(bound->get())->sin6_port);
  g->stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!g->stop_) return make_error(errno, "eventfd");
  g->acceptor_ = std::thread([p = g.get()] { p->accept_loop(); });
  log << "faultline guard: pg: listening on " << g->address_ << " for " << options.upstream
      << (options.sslmode == PgGateOptions::SslMode::VerifyFull ? " over TLS (verify-full)"
          : options.sslmode == PgGateOptions::SslMode::Require  ? " over TLS (require: the server's certificate "
                                                                  "unchecked)"
                                                                : "")
      << " (PGHOST, PGPORT set for the command); each Q, P and F judged by the guard's SQL rules\n";
  return g;
}

GuardPgGate::~GuardPgGate() {
  stopping_.store(true);
  const uint64_t one = 1;
  if (stop_) (void)!::write(stop_.get(), &one, sizeof one);
  if (acceptor_.joinable()) acceptor_.join();
  std::list<std::pair<std::shared_ptr<Conn>, std::thread>> conns;
  {
    std::lock_guard lock(conns_mu_);
    conns.swap(conns_);
  }
  for (auto& [c, t] : conns)
    if (t.joinable()) t.join();
}

std::vector<std::pair<std::string, std::string>> GuardPgGate::env() const {
  std::string host = address_.substr(0, address_.rfind(':'));
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {{"PGHOST", host}, {"PGPORT", std::to_string(port_)}};
}

PgGateCounts GuardPgGate::counts() const {
  const AtomicCounts& c = counts_;
  return {c.connections.load(), c.statements.load(), c.allowed.load(),    c.denied.load(),
          c.held.load(),        c.approved.load(),   c.would_deny.load(), c.would_hold.load()};
}

void GuardPgGate::print_summary(std::ostream& log) const {
  const PgGateCounts c = counts();
  log << "faultline guard: pg: " << c.connections << " connection" << (c.connections == 1 ? "" : "s") << ", "
      << c.statements << " statement" << (c.statements == 1 ? "" : "s") << " judged: " << c.allowed << " allowed, "
      << c.denied << " denied, " << c.held << " held (" << c.approved << " approved), " << c.would_deny
      << " would deny, " << c.would_hold << " would hold\n";
}

void GuardPgGate::say(const std::string& line) {
  std::lock_guard lock(log_mu_);
  log_ << "faultline guard: pg: " << line << "\n" << std::flush;
}

void GuardPgGate::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) return;
    if (stopping_.load()) return;
    {
      // Join the threads of connections that ended.
      std::lock_guard lock(conns_mu_);
      for (auto it = conns_.begin(); it != conns_.end();) {
        bool done = false;
        {
          std::lock_guard cl(it->first->mu);
          done = it->first->done;
        }
        if (done) {
          it->second.join();
          it = conns_.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (!(fds[0].revents & POLLIN)) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    UniqueFd client(::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC));
    if (!client) continue;
    auto c = std::make_shared<Conn>();
    c->client = std::move(client);
    SocketAddress pa;
    std::memcpy(&pa.storage, &peer, sizeof peer);
    pa.length = len;
    c->peer = endpoint_text(pa);
    counts_.connections.fetch_add(1);
    std::lock_guard lock(conns_mu_);
    conns_.emplace_back(c, std::thread([this, c] { serve(c); }));
  }
}

void GuardPgGate::record(const Conn& c, const PgJudged& j) {
  const std::string host = upstream_text_ + "/" + (c.session ? c.session->database() : std::string());
  const bool whole = j.action != PgJudged::Action::Forwarded;  // denied or held: the message's verdict for each
  for (const PgStatementVerdict& s : j.statements) {
    const GuardDecision& d = whole ? j.decision : s.decision;
    std::string note;
    if (j.action == PgJudged::Action::Denied) {
      counts_.denied.fetch_add(1);
      note = s.decision.verdict == GuardVerdict::Deny && s.decision.rule == d.rule ? "deny" : "deny (with its message)";
    } else if (j.action == PgJudged::Action::Held) {
      counts_.held.fetch_add(1);
      note = "held for approval";
    } else if (d.verdict == GuardVerdict::Deny) {
      counts_.would_deny.fetch_add(1);
      note = "would deny (monitor: passed on)";
    } else if (d.verdict == GuardVerdict::Approve) {
      counts_.would_hold.fetch_add(1);
      note = "would hold for approval (monitor: passed on)";
    } else {
      counts_.allowed.fetch_add(1);
      note = "allow";
    }
    if (j.action != PgJudged::Action::Held) counts_.statements.fetch_add(1);  // a held one counts when settled
    // Not the SQL text: it may carry what a log must not keep (a role's password, say).
    say(std::string(1, j.type) + " " + (s.verbs.empty() ? std::string("?") : joined(s.verbs)) +
        (s.tables.empty() ? "" : " " + joined(s.tables)) + " -> " + note + " (" +
        (d.rule.empty() ? std::string("the default") : "rule " + d.rule) + ": " + d.reason + ")");
    if (!judge_.activity()) continue;
    ActivityEntry e;
    e.identity = judge_.identity();
    e.kind = "sql";
    e.method = s.verbs.empty() ? "?" : joined(s.verbs);
    e.host = host;
    e.path = joined(s.tables);
    e.verdict = std::string(guard_verdict_name(j.action == PgJudged::Action::Denied ? GuardVerdict::Deny : d.verdict));
    e.rule = d.rule;
    if (auto st = judge_.activity()->append(std::move(e)); !st) say("activity log: " + st.error().describe());
  }
}

bool GuardPgGate::apply(Conn& c, const std::shared_ptr<Conn>& self, PgOutput out) {
  for (const PgJudged& j : out.judged) record(c, j);
  if (out.held) {
    const PgJudged& j = *out.held;
    record(c, j);
    PendingApproval p;
    p.request_id = (uint64_t(1) << 62) + next_hold_.fetch_add(1) + 1;
    p.denial_id = "pg_" + judge_.approval_prefix() + "_" + std::to_string(p.request_id - (uint64_t(1) << 62));
    p.identity = judge_.identity();
    p.method = j.statements.empty() || j.statements.front().verbs.empty() ? "SQL" : joined(j.statements.front().verbs);
    p.host = upstream_text_;
    std::string tables;
    for (const auto& s : j.statements) tables += (tables.empty() || s.tables.empty() ? "" : ",") + joined(s.tables);
    p.path = tables;
    p.rule = j.decision.rule;
    p.reason = j.decision.reason;
    c.hold_id = p.request_id;
    const std::string id = judge_.approvals().add(std::move(p), [this, self, n = j.statements.size()](
                                                                    ApprovalOutcome o, const std::string& why) {
      if (o == ApprovalOutcome::Withdrawn) return;
      std::lock_guard lock(self->mu);
      self->hold_id = 0;
      if (self->closed) return;
      const bool approved = o == ApprovalOutcome::Approved;
      if (approved) counts_.approved.fetch_add(n);
      const std::string reason = o == ApprovalOutcome::Denied ? "denied by a person" + (why.empty() ? "" : ": " + why)
                                                              : "no approval within the timeout";
      PgOutput next = self->session->settle(approved, reason);
      if (!apply(*self, self, std::move(next))) {
        self->closed = true;
        ::shutdown(self->client.get(), SHUT_RDWR);
        ::shutdown(self->server.get(), SHUT_RDWR);
      }
    });
    say("held for approval " + id + " (rule " + j.decision.rule + "): faultctl approvals approve " + id + " | deny " +
        id);
  }
  if (!out.to_server.empty() && !send_server(c, out.to_server)) return false;
  if (!out.to_client.empty() && !write_all(c.client.get(), out.to_client)) return false;
  return !out.close;
}

Status GuardPgGate::upstream_tls(Conn& c) {
  // SSLRequest: length 8, code 1234.5679; the server answers one byte.
  const char request[8] = {0, 0, 0, 8, 0x04, static_cast<char>(0xd2), 0x16, 0x2f};
  if (!write_all(c.server.get(), std::string_view(request, sizeof request)))
    return make_error(errno, "the upstream " + upstream_text_ + ": SSLRequest not sent");
  pollfd p[2] = {{c.server.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
  if (::poll(p, 2, 30'000) <= 0 || (p[1].revents & POLLIN))
    return make_error(ETIMEDOUT, "the upstream " + upstream_text_ + " did not answer the SSLRequest within 30s");
  char answer = 0;
  if (::recv(c.server.get(), &answer, 1, 0) != 1)
    return make_error(ECONNRESET, "the upstream " + upstream_text_ + " closed on the SSLRequest");
  if (answer != 'S')
    return make_error(EPROTO, "the upstream " + upstream_text_ + " does not offer TLS (--pg-upstream-sslmode " +
                                  (options_.sslmode == PgGateOptions::SslMode::Require ? "require" : "verify-full") +
                                  " needs it)");
  c.ssl.reset(SSL_new(tls_.get()));
  if (!c.ssl) return make_error(ENOMEM, with_openssl_errors("TLS"));
  SSL_set_fd(c.ssl.get(), c.server.get());
  auto hp = split_endpoint(upstream_text_, "--pg-upstream");
  const std::string host = hp ? hp->host : upstream_text_;
  if (options_.sslmode == PgGateOptions::SslMode::VerifyFull) {
    if (numeric_socket_address(host, 0)) {
      if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.ssl.get()), host.c_str()) != 1)
        return make_error(EINVAL, "TLS: cannot verify against the address " + host);
    } else {
      SSL_set_tlsext_host_name(c.ssl.get(), host.c_str());
      SSL_set_hostflags(c.ssl.get(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      if (SSL_set1_host(c.ssl.get(), host.c_str()) != 1)
        return make_error(EINVAL, "TLS: cannot verify against " + host);
    }
  } else if (!numeric_socket_address(host, 0)) {
    SSL_set_tlsext_host_name(c.ssl.get(), host.c_str());
  }
  timeval tv{30, 0};  // the handshake blocks, for 30 s at most
  (void)::setsockopt(c.server.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ERR_clear_error();
  if (SSL_connect(c.ssl.get()) != 1) {
    const long verify = SSL_get_verify_result(c.ssl.get());
    if (verify != X509_V_OK)
      return make_error(EPROTO, "TLS to the upstream " + upstream_text_ +
                                    ": certificate verify failed: " + X509_verify_cert_error_string(verify));
    return make_error(EPROTO, with_openssl_errors("TLS to the upstream " + upstream_text_ + ": handshake failed"));
  }
  // Relaying: non-blocking, so a read never waits under the lock for a record that is not whole.
  tv = {0, 0};
  (void)::setsockopt(c.server.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)::fcntl(c.server.get(), F_SETFL, ::fcntl(c.server.get(), F_GETFL) | O_NONBLOCK);
  return {};
}

void GuardPgGate::refuse_client(Conn& c, const std::string& code, const std::string& message) {
  // libpq shows an error sent in place of the answer to its SSLRequest as "server sent an error response
  // during SSL exchange", without the text: answer 'N' to those first, then the FATAL to the startup.
  auto read_exactly = [&](char* into, size_t n) {
    while (n > 0) {
      pollfd p[2] = {{c.client.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
      if (::poll(p, 2, 10'000) <= 0 || (p[1].revents & POLLIN)) return false;
      const ssize_t got = ::recv(c.client.get(), into, n, 0);
      if (got <= 0) return false;
      into += got;
      n -= size_t(got);
    }
    return true;
  };
  for (int i = 0; i < 3; ++i) {
    unsigned char head[8];
    if (!read_exactly(reinterpret_cast<char*>(head), sizeof head)) return;
    const uint32_t len = uint32_t(head[0]) << 24 | uint32_t(head[1]) << 16 | uint32_t(head[2]) << 8 | head[3];
    const uint32_t code_word = uint32_t(head[4]) << 24 | uint32_t(head[5]) << 16 | uint32_t(head[6]) << 8 | head[7];
    const bool encryption_request = len == 8 && (code_word == 80877103 || code_word == 80877104);
    if (!encryption_request) {
      // The startup: read it whole (a close with bytes unread resets the connection, losing the FATAL).
      std::string rest(len > 8 && len <= 10'000 ? len - 8 : 0, '\0');
      if (!read_exactly(rest.data(), rest.size())) return;
      break;
    }
    if (!write_all(c.client.get(), "N")) return;
  }
  (void)write_all(c.client.get(), pg_error_response("FATAL", code, message));
}

bool GuardPgGate::send_server(Conn& c, std::string_view data) {
  if (!c.ssl) return write_all(c.server.get(), data);
  while (!data.empty()) {
    ERR_clear_error();
    const int n = SSL_write(c.ssl.get(), data.data(), static_cast<int>(data.size()));
    if (n > 0) {
      data.remove_prefix(size_t(n));
      continue;
    }
    const int e = SSL_get_error(c.ssl.get(), n);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return false;
    pollfd p[2] = {{c.server.get(), short(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(p, 2, 30'000) <= 0 || (p[1].revents & POLLIN)) return false;
  }
  return true;
}

bool GuardPgGate::read_server_tls(const std::shared_ptr<Conn>& self, std::string& buf) {
  Conn& c = *self;
  // Under the lock (an approval's decision may write meanwhile); drains what
  // was decrypted, so nothing waits in OpenSSL's buffer for the next poll.
  std::lock_guard lock(c.mu);
  for (;;) {
    if (c.closed) return false;
    ERR_clear_error();
    const int n = SSL_read(c.ssl.get(), buf.data(), static_cast<int>(buf.size()));
    if (n <= 0) {
      const int e = SSL_get_error(c.ssl.get(), n);
      return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
    }
    if (!apply(c, self, c.session->from_server(std::string_view(buf.data(), size_t(n))))) return false;
  }
}

void GuardPgGate::serve(const std::shared_ptr<Conn>& c) {
  auto finish = [&] {
    uint64_t hold = 0;
    {
      std::lock_guard lock(c->mu);
      c->closed = true;
      hold = c->hold_id;
    }
    if (hold != 0) (void)judge_.approvals().withdraw(hold);
    std::lock_guard lock(c->mu);
    c->session.reset();
    c->ssl.reset();
    c->client.reset();
    c->server.reset();
    c->done = true;
  };
  c->server = UniqueFd(::socket(upstream_addr_.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!c->server || ::connect(c->server.get(), upstream_addr_.get(), upstream_addr_.length) != 0) {
    const std::string why = std::strerror(errno);
    say("connection from " + c->peer + ": the upstream " + upstream_text_ + " cannot be reached: " + why);
    refuse_client(*c, "08006", "faultline: the upstream " + upstream_text_ + " cannot be reached: " + why);
    return finish();
  }
  const int one = 1;
  (void)::setsockopt(c->server.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  (void)::setsockopt(c->client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (tls_) {
    if (auto st = upstream_tls(*c); !st) {
      say("connection from " + c->peer + ": " + st.error().message);
      refuse_client(*c, "08006", "faultline: " + st.error().message);
      return finish();
    }
  }
  PgSessionOptions so;
  so.policy = [this] { return judge_.policy(); };
  so.cancel_keys = cancel_keys_;
  so.max_message = options_.max_message;
  c->session = std::make_unique<PgSession>(std::move(so));
  std::string buf(64 * 1024, '\0');
  for (;;) {
    pollfd fds[3] = {{c->client.get(), POLLIN, 0}, {c->server.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[2].revents & POLLIN) break;
    bool ok = true;
    for (int side = 0; side < 2 && ok; ++side) {
      if (!(fds[side].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (side == 1 && c->ssl) {
        ok = read_server_tls(c, buf);
        continue;
      }
      const ssize_t n = ::recv(fds[side].fd, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;
        break;
      }
      std::lock_guard lock(c->mu);
      if (c->closed) {
        ok = false;
        break;
      }
      const std::string_view bytes(buf.data(), size_t(n));
      PgOutput out = side == 0 ? c->session->from_client(bytes) : c->session->from_server(bytes);
      ok = apply(*c, c, std::move(out));
    }
    if (!ok) break;
  }
  finish();
}

}  // namespace faultline
