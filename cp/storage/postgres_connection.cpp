// PostgreSQL behind SqlConnection (libpq): each statement prepared once per
// connection, parameters sent as text with their types left to the server,
// results read as text.
#include <libpq-fe.h>

#include <unordered_map>

#include "cp/storage/sql_connection.h"

namespace faultline::cp {
namespace {

using PgResult = std::unique_ptr<PGresult, void (*)(PGresult*)>;

class PostgresConnection final : public SqlConnection {
 public:
  explicit PostgresConnection(PGconn* conn) : conn_(conn) {}
  ~PostgresConnection() override { PQfinish(conn_); }
  SqlDialect dialect() const override { return SqlDialect::Postgres; }

  Result<std::vector<SqlRow>> query(const std::string& sql, const std::vector<SqlValue>& params) override {
    std::vector<std::string> text(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    for (size_t i = 0; i < params.size(); ++i) {
      if (const auto* n = std::get_if<int64_t>(&params[i])) {
        text[i] = std::to_string(*n);
        values[i] = text[i].c_str();
      } else if (const auto* t = std::get_if<std::string>(&params[i])) {
        values[i] = t->c_str();
      }
    }
    auto name = prepared(sql, static_cast<int>(params.size()));
    if (!name) return name.error();
    PgResult res(
        PQexecPrepared(conn_, name->c_str(), static_cast<int>(params.size()), values.data(), nullptr, nullptr, 0),
        PQclear);
    const auto status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      return make_error(0, std::string("postgres: ") + PQresultErrorMessage(res.get()) + " in: " + sql);
    std::vector<SqlRow> rows;
    const int n = PQntuples(res.get()), cols = PQnfields(res.get());
    rows.reserve(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      SqlRow row;
      for (int c = 0; c < cols; ++c) {
        if (PQgetisnull(res.get(), r, c))
          row.emplace_back(std::nullopt);
        else
          row.emplace_back(std::string(PQgetvalue(res.get(), r, c), static_cast<size_t>(PQgetlength(res.get(), r, c))));
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  Status exec_script(const std::string& sql) override {
    PgResult res(PQexec(conn_, sql.c_str()), PQclear);
    const auto status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      return make_error(0, std::string("postgres: ") + PQresultErrorMessage(res.get()));
    return {};
  }

  Status begin_outer(int64_t lock_key) override {
    FL_TRY(exec_script("BEGIN"));
    if (auto locked = lock_inner(lock_key); !locked) {
      (void)exec_script("ROLLBACK");
      return locked.error();
    }
    return {};
  }
  Status lock_inner(int64_t lock_key) override {
    auto r = query("SELECT pg_advisory_xact_lock($1)", {lock_key});
    if (!r) return r.error();
    return {};
  }

 private:
  // The store's statements are a fixed set of texts: each is parsed and
  // planned by the server once per connection (a named prepared statement)
  // and executed by name after. Types are left to the server, as before. A
  // bound keeps a caller that builds texts from growing the set forever.
  static constexpr size_t kMaxStatements = 512;
  Result<std::string> prepared(const std::string& sql, int nparams) {
    if (auto it = statements_.find(sql); it != statements_.end()) return it->second;
    if (statements_.size() >= kMaxStatements) {
      PgResult gone(PQexec(conn_, "DEALLOCATE ALL"), PQclear);
      if (PQresultStatus(gone.get()) != PGRES_COMMAND_OK)
        return make_error(0, std::string("postgres: ") + PQresultErrorMessage(gone.get()) + " in: DEALLOCATE ALL");
      statements_.clear();
    }
    std::string name = "fl" + std::to_string(next_statement_++);
    PgResult res(PQprepare(conn_, name.c_str(), sql.c_str(), nparams, nullptr), PQclear);
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK)
      return make_error(0, std::string("postgres: ") + PQresultErrorMessage(res.get()) + " in: " + sql);
    statements_.emplace(sql, name);
    return name;
  }

  PGconn* conn_;
  std::unordered_map<std::string, std::string> statements_;  // SQL text -> prepared statement name
  uint64_t next_statement_ = 0;
};

class PostgresListener final : public SqlListener {
 public:
  explicit PostgresListener(PGconn* conn) : conn_(conn) {}
  ~PostgresListener() override { PQfinish(conn_); }
  int fd() const override { return PQsocket(conn_); }
  Result<std::vector<std::string>> take() override {
    if (PQconsumeInput(conn_) == 0) {
      std::string msg = PQerrorMessage(conn_);
      while (!msg.empty() && msg.back() == '\n') msg.pop_back();
      return make_error(0, "postgres listener: " + msg);
    }
    std::vector<std::string> out;
    while (PGnotify* n = PQnotifies(conn_)) {
      out.emplace_back(n->extra);
      PQfreemem(n);
    }
    return out;
  }

 private:
  PGconn* conn_;
};

}  // namespace

Result<std::unique_ptr<SqlListener>> listen_postgres(const std::string& conninfo, const std::string& channel) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = conn ? PQerrorMessage(conn) : "out of memory";
    PQfinish(conn);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return make_error(0, "postgres listener: cannot connect: " + msg);
  }
  auto listener = std::make_unique<PostgresListener>(conn);
  // The channel is one of faultcp's own names, never a user's: quoted as an identifier anyway.
  char* quoted = PQescapeIdentifier(conn, channel.c_str(), channel.size());
  if (quoted == nullptr) return make_error(0, "postgres listener: cannot quote the channel");
  PgResult res(PQexec(conn, ("LISTEN " + std::string(quoted)).c_str()), PQclear);
  PQfreemem(quoted);
  if (PQresultStatus(res.get()) != PGRES_COMMAND_OK)
    return make_error(0, std::string("postgres listener: LISTEN: ") + PQresultErrorMessage(res.get()));
  if (PQsetnonblocking(conn, 1) != 0)
    return make_error(0, "postgres listener: cannot make the connection non-blocking");
  return std::unique_ptr<SqlListener>(std::move(listener));
}

Result<std::unique_ptr<SqlConnection>> open_postgres(const std::string& conninfo) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = conn ? PQerrorMessage(conn) : "out of memory";
    PQfinish(conn);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return make_error(0, "postgres: cannot connect: " + msg);
  }
  auto c = std::make_unique<PostgresConnection>(conn);
  FL_TRY(c->exec_script("SET client_min_messages = warning"));
  return std::unique_ptr<SqlConnection>(std::move(c));
}

}  // namespace faultline::cp
