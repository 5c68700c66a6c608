// The PostgreSQL v3 protocol between a client and its server, judged.
#include "userspace/guard/pg_session.h"

#include <sys/random.h>

#include <cstring>

#include "userspace/guard/sql_facts.h"

namespace faultline {
namespace pg_session_detail {

constexpr uint32_t kProtocol3 = 196608;  // 3.0
constexpr uint32_t kSslRequest = 80877103;
constexpr uint32_t kGssEncRequest = 80877104;
constexpr uint32_t kCancelRequest = 80877102;
constexpr uint32_t kMaxStartup = 10000;  // the server's own limit on a startup packet
// A server message the gate rewrites (R, K, E) is read whole up to this;
// longer ones pass untouched.
constexpr size_t kMaxServerRewrite = 1u << 20;

uint32_t be32(std::string_view b, size_t at) {
  return (uint32_t(uint8_t(b[at])) << 24) | (uint32_t(uint8_t(b[at + 1])) << 16) | (uint32_t(uint8_t(b[at + 2])) << 8) |
         uint32_t(uint8_t(b[at + 3]));
}

void put32(std::string& out, uint32_t v) {
  out.push_back(char(v >> 24));
  out.push_back(char(v >> 16));
  out.push_back(char(v >> 8));
  out.push_back(char(v));
}

uint32_t random32() {
  uint32_t v = 0;
  while (::getrandom(&v, sizeof v, 0) != ssize_t(sizeof v)) {
  }
  return v;
}

// A NUL-terminated string at `at` of body: the string and where the next
// field starts, or nothing when the terminator is missing.
std::optional<std::pair<std::string_view, size_t>> cstring(std::string_view body, size_t at) {
  if (at > body.size()) return std::nullopt;
  const size_t end = body.find('\0', at);
  if (end == std::string_view::npos) return std::nullopt;
  return std::make_pair(body.substr(at, end - at), end + 1);
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace pg_session_detail

using namespace pg_session_detail;

PgCancelKeys::Key PgCancelKeys::add(Key upstream) {
  std::lock_guard lock(mu_);
  Key gate{upstream.pid, random32()};
  while (keys_.contains(gate)) gate.secret = random32();
  keys_[gate] = upstream;
  return gate;
}

void PgCancelKeys::remove(Key gate) {
  std::lock_guard lock(mu_);
  keys_.erase(gate);
}

std::optional<PgCancelKeys::Key> PgCancelKeys::upstream_of(Key gate) const {
  std::lock_guard lock(mu_);
  auto it = keys_.find(gate);
  if (it == keys_.end()) return std::nullopt;
  return it->second;
}

std::string pg_message(char type, std::string_view body) {
  std::string out;
  out.reserve(body.size() + 5);
  out.push_back(type);
  put32(out, uint32_t(body.size() + 4));
  out.append(body);
  return out;
}

std::string pg_error_response(std::string_view severity, std::string_view sqlstate, std::string_view message) {
  std::string body;
  for (auto [code, value] :
       {std::pair<char, std::string_view>{'S', severity}, {'V', severity}, {'C', sqlstate}, {'M', message}}) {
    body.push_back(code);
    // A NUL would end the field early: none of ours has one, a rule's reason might.
    for (char c : value) body.push_back(c == '\0' ? ' ' : c);
    body.push_back('\0');
  }
  body.push_back('\0');
  return pg_message('E', body);
}

std::string pg_blocked_text(const std::string& rule, const std::string& reason) {
  return "blocked by faultline: " + (rule.empty() ? std::string("default") : rule) + ": " + reason;
}

PgSession::PgSession(PgSessionOptions options) : options_(std::move(options)) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%08x%08x", random32(), random32());
  nonce_ = hex;
}

PgSession::~PgSession() {
  if (gate_key_ && options_.cancel_keys) options_.cancel_keys->remove(*gate_key_);
}

void PgSession::fatal(std::string_view message, PgOutput& out) {
  out.to_client += pg_error_response("FATAL", "08P01", message);
  out.close = true;
  client_phase_ = ClientPhase::Closed;
  client_in_.clear();
}

PgOutput PgSession::from_client(std::string_view bytes) {
  PgOutput out;
  if (client_phase_ == ClientPhase::Closed) return out;
  // The rest of a message passed through as it streams: not kept.
  if (client_stream_left_ > 0 && !held_) {
    const size_t n = std::min(client_stream_left_, bytes.size());
    out.to_server.append(bytes.substr(0, n));
    client_stream_left_ -= n;
    bytes.remove_prefix(n);
  }
  client_in_.append(bytes);
  if (held_) return out;
  if (client_phase_ == ClientPhase::Startup) client_startup(out);
  if (client_phase_ == ClientPhase::Messages) client_messages(out);
  return out;
}

void PgSession::client_startup(PgOutput& out) {
  while (client_phase_ == ClientPhase::Startup && client_in_.size() >= 8) {
    const uint32_t len = be32(client_in_, 0);
    const uint32_t code = be32(client_in_, 4);
    if (len < 8 || len > kMaxStartup)
      return fatal("invalid startup packet length " + std::to_string(len) + " (faultline)", out);
    if (client_in_.size() < len) return;
    const std::string packet = client_in_.substr(0, len);
    client_in_.erase(0, len);
    if (code == kSslRequest || code == kGssEncRequest) {
      if (len != 8) return fatal("invalid SSL or GSS encryption request (faultline)", out);
      // The gate speaks plaintext to its client (on loopback); the client goes on with its startup.
      out.to_client += 'N';
      continue;
    }
    if (code == kCancelRequest) {
      client_phase_ = ClientPhase::Closed;
      out.close = true;
      if (len != 16 || !options_.cancel_keys) return;
      auto up = options_.cancel_keys->upstream_of({be32(packet, 8), be32(packet, 12)});
      if (!up) return;  // not a key of ours: dropped, as a server drops a wrong one
      std::string cancel;
      put32(cancel, 16);
      put32(cancel, kCancelRequest);
      put32(cancel, up->pid);
      put32(cancel, up->secret);
      out.to_server += cancel;
      return;
    }
    if (code >> 16 != 3)
      return fatal("unsupported frontend protocol " + std::to_string(code >> 16) + "." + std::to_string(code & 0xffff) +
                       ": the gate speaks 3.0 (faultline)",
                   out);
    // user and database, for the log: pairs of C strings after the version.
    size_t at = 8;
    while (at < packet.size() && packet[at] != '\0') {
      auto name = cstring(packet, at);
      if (!name) return fatal("invalid startup packet layout (faultline)", out);
      auto value = cstring(packet, name->second);
      if (!value) return fatal("invalid startup packet layout (faultline)", out);
      if (name->first == "user") user_ = std::string(value->first);
      if (name->first == "database") database_ = std::string(value->first);
      at = value->second;
    }
    if (database_.empty()) database_ = user_;
    out.to_server += packet;
    client_phase_ = ClientPhase::Messages;
  }
}

void PgSession::client_messages(PgOutput& out) {
  while (client_phase_ == ClientPhase::Messages && !held_ && client_in_.size() >= 5) {
    const char type = client_in_[0];
    const uint32_t len = be32(client_in_, 1);
    if (len < 4) return fatal("invalid message length " + std::to_string(len) + " (faultline)", out);
    const bool judged = type == 'Q' || type == 'P' || type == 'F';
    if (!judged) {
      // Bind, Execute, Sync, CopyData, password messages...: passed as they
      // stream (the statement they run was judged at its Parse or Query).
      const size_t whole = size_t(len) + 1;
      const size_t now = std::min(whole, client_in_.size());
      out.to_server.append(client_in_, 0, now);
      client_stream_left_ = whole - now;
      client_in_.erase(0, now);
      if (type == 'X') client_phase_ = ClientPhase::Closed;
      continue;
    }
    if (len - 4 > options_.max_message)
      return fatal("a message of " + std::to_string(len - 4) + " bytes, over the gate's limit of " +
                       std::to_string(options_.max_message) + " (faultline)",
                   out);
    if (client_in_.size() < size_t(len) + 1) return;
    std::string message = client_in_.substr(0, size_t(len) + 1);
    client_in_.erase(0, size_t(len) + 1);
    judge(std::move(message), out);
  }
}

void PgSession::judge(std::string message, PgOutput& out) {
  const char type = message[0];
  const std::string_view body = std::string_view(message).substr(5);
  PgJudged j;
  j.type = type;
  const std::shared_ptr<const GuardPolicy> policy = options_.policy();
  const bool enforce = policy->mode == GuardMode::Enforce;
  auto fixed = [&](std::string_view rule, std::string reason) {
    return GuardDecision{GuardVerdict::Deny, std::string(rule), std::move(reason), enforce, false};
  };
  if (type == 'F') {
    PgStatementVerdict s;
    s.verbs = {"FUNCTION CALL"};
    s.decision = fixed(kPgRuleFunctionCall, "a function call by OID (the F message) cannot be judged");
    j.statements.push_back(std::move(s));
  } else {
    // Q: the text. P: the statement's name, then the text.
    std::optional<std::pair<std::string_view, size_t>> text;
    if (type == 'Q') {
      text = cstring(body, 0);
    } else if (auto name = cstring(body, 0)) {
      text = cstring(body, name->second);
    }
    if (!text) return fatal("invalid " + std::string(1, type) + " message: a string without its end (faultline)", out);
    j.sql = std::string(text->first);
    SqlFacts facts = sql_facts(j.sql);
    if (!facts.parsed) {
      PgStatementVerdict s;
      s.decision = fixed(kPgRuleUnparseable, "the SQL does not parse: " + facts.error);
      j.statements.push_back(std::move(s));
    }
    for (const SqlStatementFacts& st : facts.statements) {
      PgStatementVerdict s{st.verbs, st.tables, st.functions, {}};
      if (!st.verbs.empty() && st.verbs.front() == "DO")
        s.decision = fixed(kPgRuleDo, "DO runs code on the server that the gate cannot judge");
      else if (st.copy_program)
        s.decision = fixed(kPgRuleCopyProgram, "COPY ... PROGRAM runs a command on the server");
      else {
        RequestFacts f;
        f.method = st.verbs.empty() ? "" : st.verbs.front();
        f.sql = &st;
        s.decision = decide(*policy, f);
      }
      if (s.decision.reason.empty())
        s.decision.reason = s.decision.verdict == GuardVerdict::Approve ? "held for approval" : "denied by rule";
      j.statements.push_back(std::move(s));
    }
  }
  // The message's verdict: its first deny, else its first approve, else allow.
  j.decision = GuardDecision{GuardVerdict::Allow, "", "no statement", enforce, false};
  bool set = false;
  for (GuardVerdict v : {GuardVerdict::Deny, GuardVerdict::Approve, GuardVerdict::Allow}) {
    for (const auto& s : j.statements)
      if (!set && s.decision.verdict == v) {
        j.decision = s.decision;
        set = true;
      }
  }
  if (enforce && j.decision.verdict == GuardVerdict::Deny) return deny(message, std::move(j), out);
  if (enforce && j.decision.verdict == GuardVerdict::Approve) {
    j.action = PgJudged::Action::Held;
    out.held = j;
    held_ = Held{std::move(message), std::move(j)};
    return;
  }
  out.to_server += message;
  out.judged.push_back(std::move(j));
}

void PgSession::deny(const std::string& message, PgJudged judged, PgOutput& out) {
  judged.action = PgJudged::Action::Denied;
  // A bare identifier is a syntax error wherever the server reads it; the
  // marker finds the server's answer to it among the others.
  const std::string marker = "faultline_denied_" + nonce_ + "_" + std::to_string(++next_denial_);
  denials_[marker] = pg_blocked_text(judged.decision.rule, judged.decision.reason);
  std::string body;
  if (message[0] == 'P') {
    auto name = cstring(std::string_view(message).substr(5), 0);
    body.append(name ? name->first : std::string_view());
    body.push_back('\0');
    body += marker;
    body.push_back('\0');
    body.append(2, '\0');  // no parameter types
    out.to_server += pg_message('P', body);
  } else {
    // Q, and F: a failing query gets the same answer shape as a failing call
    // (ErrorResponse, then ReadyForQuery).
    body = marker;
    body.push_back('\0');
    out.to_server += pg_message('Q', body);
  }
  out.judged.push_back(std::move(judged));
}

PgOutput PgSession::settle(bool approved, const std::string& reason) {
  PgOutput out;
  if (!held_) return out;
  Held h = std::move(*held_);
  held_.reset();
  // The statements that were held get the person's (or the timeout's) verdict.
  for (PgStatementVerdict& s : h.judged.statements) {
    if (s.decision.verdict != GuardVerdict::Approve) continue;
    s.decision.verdict = approved ? GuardVerdict::Allow : GuardVerdict::Deny;
    if (!approved) s.decision.reason = reason;
  }
  if (approved) {
    h.judged.action = PgJudged::Action::Forwarded;
    h.judged.decision.verdict = GuardVerdict::Allow;
    out.to_server += h.message;
    out.judged.push_back(std::move(h.judged));
  } else {
    h.judged.decision.verdict = GuardVerdict::Deny;
    h.judged.decision.reason = reason;
    deny(h.message, std::move(h.judged), out);
  }
  if (client_phase_ == ClientPhase::Messages) client_messages(out);
  return out;
}

PgOutput PgSession::from_server(std::string_view bytes) {
  PgOutput out;
  if (server_stream_left_ > 0) {
    const size_t n = std::min(server_stream_left_, bytes.size());
    out.to_client.append(bytes.substr(0, n));
    server_stream_left_ -= n;
    bytes.remove_prefix(n);
  }
  server_in_.append(bytes);
  while (server_in_.size() >= 5) {
    const char type = server_in_[0];
    const uint32_t len = be32(server_in_, 1);
    if (len < 4) {
      out.close = true;
      server_in_.clear();
      return out;
    }
    const size_t whole = size_t(len) + 1;
    const bool rewrite = (type == 'R' || type == 'K' || type == 'E') && whole <= kMaxServerRewrite;
    if (!rewrite) {
      const size_t now = std::min(whole, server_in_.size());
      out.to_client.append(server_in_, 0, now);
      server_stream_left_ = whole - now;
      server_in_.erase(0, now);
      continue;
    }
    if (server_in_.size() < whole) break;
    std::string body = server_in_.substr(5, len - 4);
    server_in_.erase(0, whole);
    server_message(type, std::move(body), out);
  }
  return out;
}

void PgSession::server_message(char type, std::string body, PgOutput& out) {
  if (type == 'R' && body.size() >= 4 && be32(body, 0) == 10) {
    // AuthenticationSASL: the mechanisms, minus the -PLUS ones (channel
    // binding to the gate's connection could not be checked by the server).
    std::string kept;
    put32(kept, 10);
    size_t at = 4;
    while (auto m = cstring(body, at)) {
      at = m->second;
      if (m->first.empty()) break;
      if (m->first.ends_with("-PLUS")) continue;
      kept.append(m->first);
      kept.push_back('\0');
    }
    kept.push_back('\0');
    out.to_client += pg_message('R', kept);
    return;
  }
  if (type == 'K' && body.size() == 8 && options_.cancel_keys) {
    if (gate_key_) options_.cancel_keys->remove(*gate_key_);
    gate_key_ = options_.cancel_keys->add({be32(body, 0), be32(body, 4)});
    std::string mine;
    put32(mine, gate_key_->pid);
    put32(mine, gate_key_->secret);
    out.to_client += pg_message('K', mine);
    return;
  }
  if (type == 'E' && !denials_.empty()) {
    // The message field (M) of an error about one of our replacements.
    size_t at = 0;
    while (at < body.size() && body[at] != '\0') {
      const char code = body[at];
      auto value = cstring(body, at + 1);
      if (!value) break;
      if (code == 'M') {
        for (auto it = denials_.begin(); it != denials_.end(); ++it) {
          // Quoted, as the server quotes the token: _1 is not found in _10's error.
          if (value->first.find("\"" + it->first + "\"") == std::string_view::npos) continue;
          out.to_client += pg_error_response("ERROR", "42501", it->second);
          denials_.erase(it);
          return;
        }
      }
      at = value->second;
    }
  }
  out.to_client += pg_message(type, body);
}

}  // namespace faultline
