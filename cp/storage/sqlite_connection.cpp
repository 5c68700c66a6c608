// SQLite behind SqlConnection: one file, WAL journal, foreign keys on, a busy
// timeout so that a second process (sqlite3 on the command line, a test) waits
// instead of failing.
#include <sqlite3.h>

#include <charconv>
#include <cstdio>
#include <memory>
#include <unordered_map>

#include "cp/storage/sql_connection.h"

namespace faultline::cp {
namespace {

class SqliteConnection final : public SqlConnection {
 public:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}
  ~SqliteConnection() override {
    for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }
  SqlDialect dialect() const override { return SqlDialect::Sqlite; }

  Result<std::vector<SqlRow>> query(const std::string& sql, const std::vector<SqlValue>& params) override {
    auto prepared = statement(sql);
    if (!prepared) return prepared.error();
    sqlite3_stmt* raw = *prepared;
    // Reset and unbound on every way out: the statement is kept for the next call.
    std::unique_ptr<sqlite3_stmt, void (*)(sqlite3_stmt*)> in_use(raw, [](sqlite3_stmt* s) {
      sqlite3_reset(s);
      sqlite3_clear_bindings(s);
    });
    // $N is a named parameter to SQLite: bound by name, so a query may use
    // them in any order, as PostgreSQL allows.
    for (size_t i = 0; i < params.size(); ++i) {
      char name[24];
      std::snprintf(name, sizeof(name), "$%zu", i + 1);
      const int idx = sqlite3_bind_parameter_index(raw, name);
      if (idx == 0) continue;  // not used by this statement
      int rc = SQLITE_OK;
      if (const auto* n = std::get_if<int64_t>(&params[i]))
        rc = sqlite3_bind_int64(raw, idx, *n);
      else if (const auto* t = std::get_if<std::string>(&params[i]))
        rc = sqlite3_bind_text(raw, idx, t->data(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
      else
        rc = sqlite3_bind_null(raw, idx);
      if (rc != SQLITE_OK) return make_error(0, std::string("sqlite bind: ") + sqlite3_errmsg(db_));
    }
    std::vector<SqlRow> rows;
    const int n = sqlite3_column_count(raw);
    for (;;) {
      const int rc = sqlite3_step(raw);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return make_error(0, std::string("sqlite: ") + sqlite3_errmsg(db_) + " in: " + sql);
      SqlRow row;
      row.reserve(static_cast<size_t>(n));
      for (int c = 0; c < n; ++c) {
        const int type = sqlite3_column_type(raw, c);
        if (type == SQLITE_NULL) {
          row.emplace_back(std::nullopt);
        } else if (type == SQLITE_INTEGER) {
          // Formatted here, as SQLite would, without SQLite converting the
          // value to text in the row's own memory first (ids, times, flags:
          // most of every row).
          char digits[24];
          const auto end = std::to_chars(digits, digits + sizeof digits, sqlite3_column_int64(raw, c)).ptr;
          row.emplace_back(std::string(digits, end));
        } else {
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(raw, c));
          row.emplace_back(std::string(text, static_cast<size_t>(sqlite3_column_bytes(raw, c))));
        }
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  Status exec_script(const std::string& sql) override {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return make_error(0, "sqlite: " + msg);
    }
    return {};
  }

  Status begin_outer(int64_t) override {
    auto r = query("BEGIN IMMEDIATE", {});
    if (!r) return r.error();
    return {};
  }
  Status lock_inner(int64_t) override { return {}; }  // BEGIN IMMEDIATE holds the one write lock

 private:
  // The store's statements are a fixed set of texts: each is compiled once
  // and kept (a bound keeps a caller that builds texts from growing it forever).
  static constexpr size_t kMaxStatements = 512;
  Result<sqlite3_stmt*> statement(const std::string& sql) {
    if (auto it = statements_.find(sql); it != statements_.end()) return it->second;
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &raw, nullptr) !=
        SQLITE_OK) {
      sqlite3_finalize(raw);
      return make_error(0, std::string("sqlite: ") + sqlite3_errmsg(db_) + " in: " + sql);
    }
    if (statements_.size() >= kMaxStatements) {
      for (auto& [text, stmt] : statements_) sqlite3_finalize(stmt);
      statements_.clear();
    }
    statements_.emplace(sql, raw);
    return raw;
  }

  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace

Result<std::unique_ptr<SqlConnection>> open_sqlite(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return make_error(0, "sqlite: cannot open " + path + ": " + msg);
  }
  auto conn = std::make_unique<SqliteConnection>(db);
  sqlite3_busy_timeout(db, 5000);
  // WAL: readers do not block the writer; synchronous=NORMAL is durable
  // across a process crash (not a power loss) in WAL mode, and much cheaper.
  auto wal = conn->query("PRAGMA journal_mode=WAL", {});
  if (!wal) return wal.error();
  if (wal->empty() || !(*wal)[0][0] || *(*wal)[0][0] != "wal")
    return make_error(0, "sqlite: " + path + " does not take the WAL journal mode");
  FL_TRY(conn->exec_script("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"));
  return std::unique_ptr<SqlConnection>(std::move(conn));
}

}  // namespace faultline::cp
