// One client connection of the Postgres gate (faultctl guard --pg-listen):
// the PostgreSQL v3 protocol between a client and its server, judged. No I/O
// of its own: the caller feeds the bytes each side sent and writes what comes
// out (ctl/guard_pg_gate.cpp).
//
// Startup: SSLRequest and GSSENCRequest are answered 'N' by the gate (the
// client goes on in plaintext to the gate); a CancelRequest carrying a key the
// gate gave out is sent upstream with the server's key; the StartupMessage and
// the authentication exchange pass as they are, except that the server's SASL
// mechanisms lose their -PLUS variants (channel binding cannot cross the gate)
// and its BackendKeyData is swapped for the gate's own.
//
// Queries: each Q (simple query, maybe several statements), P (Parse of the
// extended protocol) and F (function call) is judged by the guard's policy:
// SQL facts from libpg_query (sql_facts.h), statement by statement. A denied
// message (when enforcing) is replaced upstream by one that fails, so the
// server aborts what the client is told (inside a transaction the client then
// gets 25P02); the server's error for it is rewritten into the client's
// ErrorResponse, SQLSTATE 42501, naming the rule. An approve verdict holds the
// message (and what the client sends after it) until settle().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/guard/guard_policy.h"

namespace faultline {

// The backend keys the gate gave its clients, mapped to the server's: shared
// by every session of one gate (a CancelRequest comes on a new connection).
class PgCancelKeys {
 public:
  struct Key {
    uint32_t pid = 0;
    uint32_t secret = 0;
    auto operator<=>(const Key&) const = default;
  };
  // The gate's key for a server's key (a fresh random secret, the same pid).
  [[nodiscard]] Key add(Key upstream);
  void remove(Key gate);
  [[nodiscard]] std::optional<Key> upstream_of(Key gate) const;

 private:
  mutable std::mutex mu_;
  std::map<Key, Key> keys_;
};

// Fixed verdicts the policy's rules cannot change (named like rules).
inline constexpr std::string_view kPgRuleUnparseable = kSqlRuleUnparseable;  // libpg_query cannot read it
inline constexpr std::string_view kPgRuleDo = "sql_do";                      // DO: code run on the server
inline constexpr std::string_view kPgRuleCopyProgram = "sql_copy_program";   // COPY ... PROGRAM: a shell command
inline constexpr std::string_view kPgRuleFunctionCall = "pg_function_call";  // an F message: a function by OID

struct PgSessionOptions {
  // The policy each message is judged by, asked once per message.
  std::function<std::shared_ptr<const GuardPolicy>()> policy;
  std::shared_ptr<PgCancelKeys> cancel_keys;  // may be null: CancelRequests are dropped
  size_t max_message = 16u << 20;             // a Q, P or F longer than this: FATAL 08P01
};

// One statement of a judged message.
struct PgStatementVerdict {
  std::vector<std::string> verbs, tables, functions;
  GuardDecision decision;
};

// One judged message.
struct PgJudged {
  enum class Action : uint8_t { Forwarded, Denied, Held };
  char type = 'Q';                             // 'Q', 'P' or 'F'
  std::string sql;                             // the text ("" for F); for the caller's own log, never the activity log
  std::vector<PgStatementVerdict> statements;  // one, with no verbs, for unparseable SQL and F
  GuardDecision decision;                      // the message's: its first deny, else its first approve, else allow
  Action action = Action::Forwarded;
};

// What the caller does after feeding bytes: write to_server and to_client
// (each in order), record what was judged, hold for approval, and close both
// connections when close is set (after writing).
struct PgOutput {
  std::string to_server;
  std::string to_client;
  bool close = false;
  std::vector<PgJudged> judged;
  std::optional<PgJudged> held;  // the message now waiting for settle()
};

class PgSession {
 public:
  explicit PgSession(PgSessionOptions options);
  ~PgSession();  // gives back its cancel key
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;

  [[nodiscard]] PgOutput from_client(std::string_view bytes);
  [[nodiscard]] PgOutput from_server(std::string_view bytes);
  // The held message's outcome: forwarded (approved) or denied with the
  // reason given; then what the client sent after it is processed.
  [[nodiscard]] PgOutput settle(bool approved, const std::string& reason);
  [[nodiscard]] bool holding() const { return held_.has_value(); }
  // From the StartupMessage: "" until it came.
  [[nodiscard]] const std::string& user() const { return user_; }
  [[nodiscard]] const std::string& database() const { return database_; }

 private:
  enum class ClientPhase : uint8_t { Startup, Messages, Closed };
  struct Held {
    std::string message;  // the whole message, as the client sent it
    PgJudged judged;
  };
  void client_startup(PgOutput& out);
  void client_messages(PgOutput& out);
  void judge(std::string message, PgOutput& out);
  void deny(const std::string& message, PgJudged judged, PgOutput& out);
  void fatal(std::string_view message, PgOutput& out);
  void server_message(char type, std::string body, PgOutput& out);

  PgSessionOptions options_;
  std::string nonce_;  // marks this session's failing replacements
  ClientPhase client_phase_ = ClientPhase::Startup;
  std::string client_in_;          // bytes not processed yet
  size_t client_stream_left_ = 0;  // body bytes of a passed-through message still to come
  std::optional<Held> held_;
  std::string server_in_;
  size_t server_stream_left_ = 0;
  uint64_t next_denial_ = 0;
  std::map<std::string, std::string> denials_;  // marker -> the client's error text, until the server answers
  std::optional<PgCancelKeys::Key> gate_key_;
  std::string user_, database_;
};

// A protocol message: type, length, body.
[[nodiscard]] std::string pg_message(char type, std::string_view body);
// An ErrorResponse (severity ERROR or FATAL).
[[nodiscard]] std::string pg_error_response(std::string_view severity, std::string_view sqlstate,
                                            std::string_view message);
// "blocked by faultline: RULE: REASON" (RULE "default" when no rule matched).
[[nodiscard]] std::string pg_blocked_text(const std::string& rule, const std::string& reason);

}  // namespace faultline
