// What a SQL text does, as the guard's rules see it: each statement's verbs,
// tables and functions, read from PostgreSQL's own grammar (libpg_query,
// PostgreSQL 15). The Postgres gate (pg_session.h) asks for every Q and P.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace faultline {

// One top-level statement. Nested statements count as the statement's own:
// `WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d` has the verbs
// SELECT and DELETE; `INSERT INTO a SELECT * FROM b` has INSERT and SELECT.
struct SqlStatementFacts {
  std::vector<std::string> verbs;      // uppercase, each once: SELECT, INSERT, DROP, ... (first: the statement's own)
  std::vector<std::string> tables;     // as written: "t", "s.t" (unquoted names come lowercased), each once
  std::vector<std::string> functions;  // called functions as written: "now", "pg_catalog.pg_sleep", each once
  bool copy_program = false;           // COPY ... TO/FROM PROGRAM: runs a command on the server
};

struct SqlFacts {
  bool parsed = false;
  std::string error;                          // why it does not parse (libpg_query's message and its position)
  std::vector<SqlStatementFacts> statements;  // an empty text has none
};

[[nodiscard]] SqlFacts sql_facts(std::string_view sql);

}  // namespace faultline
