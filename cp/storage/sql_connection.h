// One SQL connection, SQLite or PostgreSQL, behind the few calls the store
// needs: statements with $1..$N parameters, rows of text, transactions. The
// store's queries are written once in the SQL both dialects share; only the
// schema (migrations.cpp) and the locking of a transaction differ.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/result.h"

namespace faultline::cp {

// A parameter: NULL, an integer or text.
using SqlValue = std::variant<std::monostate, int64_t, std::string>;
// A row as text (NULL is nullopt), columns in the order selected.
using SqlRow = std::vector<std::optional<std::string>>;

enum class SqlDialect { Sqlite, Postgres };

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  [[nodiscard]] virtual SqlDialect dialect() const = 0;
  // Runs one statement; the rows it returns (RETURNING included).
  [[nodiscard]] virtual Result<std::vector<SqlRow>> query(const std::string& sql,
                                                          const std::vector<SqlValue>& params = {}) = 0;
  // Several statements without parameters (a migration).
  [[nodiscard]] virtual Status exec_script(const std::string& sql) = 0;
  // BEGIN that serialises writers: BEGIN IMMEDIATE on SQLite; on PostgreSQL a
  // transaction holding the advisory lock `lock_key` until it ends.
  // Transactions nest flat: an inner begin joins the outer transaction (taking
  // its lock too, on PostgreSQL), an inner commit does nothing, an inner
  // rollback dooms the outer one. So a store call that needs a transaction
  // can run alone or inside a handler's (the action and its audit entry).
  [[nodiscard]] Status begin_exclusive(int64_t lock_key);
  [[nodiscard]] Status commit();
  void rollback();

 protected:
  [[nodiscard]] virtual Status begin_outer(int64_t lock_key) = 0;
  [[nodiscard]] virtual Status lock_inner(int64_t lock_key) = 0;

 private:
  int depth_ = 0;
  bool doomed_ = false;
};

// A connection of its own that LISTENs (PostgreSQL): fd() turns readable when
// notifications came; take() reads their payloads without blocking.
class SqlListener {
 public:
  virtual ~SqlListener() = default;
  [[nodiscard]] virtual int fd() const = 0;
  // The payloads that arrived; an error if the connection broke.
  [[nodiscard]] virtual Result<std::vector<std::string>> take() = 0;
};
[[nodiscard]] Result<std::unique_ptr<SqlListener>> listen_postgres(const std::string& conninfo,
                                                                   const std::string& channel);

// "sqlite:PATH" or "postgres://..." / "postgresql://..." (a libpq URI).
[[nodiscard]] Result<std::unique_ptr<SqlConnection>> open_database(const std::string& url);
[[nodiscard]] Result<std::unique_ptr<SqlConnection>> open_sqlite(const std::string& path);
[[nodiscard]] Result<std::unique_ptr<SqlConnection>> open_postgres(const std::string& conninfo);

// Rolls back on scope exit unless committed: every early return of a
// transaction's body leaves the database as it was.
class SqlTransaction {
 public:
  explicit SqlTransaction(SqlConnection& db) : db_(db) {}
  SqlTransaction(const SqlTransaction&) = delete;
  SqlTransaction& operator=(const SqlTransaction&) = delete;
  ~SqlTransaction() {
    if (open_) db_.rollback();
  }
  [[nodiscard]] Status begin(int64_t lock_key) {
    FL_TRY(db_.begin_exclusive(lock_key));
    open_ = true;
    return {};
  }
  [[nodiscard]] Status commit() {
    open_ = false;
    return db_.commit();
  }

 private:
  SqlConnection& db_;
  bool open_ = false;
};

}  // namespace faultline::cp
