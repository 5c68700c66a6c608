// What a ClickHouse query over HTTP does, as the guard's rules see it: the
// same verbs, tables and functions (SqlFacts) the Postgres gate reads with
// libpg_query, here read by a small tokenizer of ClickHouse's own lexical
// rules (libpg_query does not parse ClickHouse SQL), and where an HTTP
// request carries that SQL: its ?query= parameter, then its body. No I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "userspace/guard/sql_facts.h"

namespace faultline {

// How much of a request's body the guard reads for its SQL; the rest of the
// body streams upstream unread (an INSERT's data).
inline constexpr size_t kClickHouseSqlBodyBytes = 64 * 1024;

struct ClickHouseSqlFacts {
  SqlFacts facts;
  // An INSERT's data began (after VALUES, or FORMAT and its name): what
  // follows is data, not SQL, so the facts are settled however long it is.
  bool data_begun = false;
};

// The statements of `sql` (split at ';'), each read for:
//   verb   the statement's kind, uppercase: SELECT (also WITH ...), INSERT,
//          DROP, TRUNCATE, ALTER, CREATE, ATTACH, DETACH, RENAME, OPTIMIZE,
//          SYSTEM, KILL, SET, SHOW, DESCRIBE (DESC), EXISTS, USE, CHECK,
//          DELETE, EXPLAIN. ALTER adds each action's verb (ALTER TABLE t
//          DELETE WHERE ...: ALTER and DELETE; UPDATE; DROP PARTITION and DROP
//          COLUMN: DROP; DETACH, ATTACH, CLEAR, REPLACE, FREEZE, ADD, MODIFY,
//          MOVE, FETCH, ...); INSERT ... SELECT adds SELECT.
//   tables the object a statement names (DROP TABLE db.t: "db.t"; a
//          database, DROP DATABASE db: "db.*", its every table), INSERT INTO's
//          table, both names of each RENAME pair, CREATE's AS and TO tables,
//          and each table after FROM or JOIN (not ARRAY JOIN, not FROM inside
//          a function's parentheses: EXTRACT(DAY FROM d)); as written,
//          backquotes and double quotes removed.
//   functions every name followed by '(' that is not a keyword: functions,
//          table functions (FROM url(...), INSERT INTO FUNCTION file(...))
//          and table engines (ENGINE = URL(...)).
// Unreadable (facts.parsed false, facts.error why): an unterminated string,
// quoted name or comment, a statement of another kind, an object statement
// without its name, or (`whole` false: the text was cut at
// kClickHouseSqlBodyBytes) a statement still open where the text ends.
[[nodiscard]] ClickHouseSqlFacts clickhouse_sql_facts(std::string_view sql, bool whole);

// One HTTP request's SQL as it arrives: ClickHouse runs the ?query=
// parameter (decoded as its HTTP interface does: %XX, '+' a space) followed
// by a newline and the request's body.
class ClickHouseRequestSql {
 public:
  // `target`: the request target (path and query). `body_encoded`: the body
  // is compressed (a Content-Encoding, or ClickHouse's decompress=1), so its
  // SQL cannot be read.
  ClickHouseRequestSql(std::string_view target, bool body_encoded);

  // Body bytes as they come (only the first kClickHouseSqlBodyBytes are
  // kept). True once the facts are settled: an INSERT's data has begun, or
  // the cap is reached.
  bool feed(std::string_view body);
  [[nodiscard]] bool settled() const { return settled_; }
  // The facts: `body_end` the whole body was fed (else it was cut).
  [[nodiscard]] SqlFacts facts(bool body_end) const;
  // The request carries SQL at all (a query parameter or a body).
  [[nodiscard]] bool has_sql() const { return !query_.empty() || !body_.empty(); }

 private:
  [[nodiscard]] std::string text() const;

  std::string query_;
  std::string bad_query_;  // why the query parameter cannot be decoded ("" it can)
  bool body_encoded_ = false;
  std::string body_;
  bool settled_ = false;
};

}  // namespace faultline
