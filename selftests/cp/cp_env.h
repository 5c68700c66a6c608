// What the control-plane tests share: a database of either backend, fresh per
// test (a file for SQLite, a new database in the shared cluster for PostgreSQL).
#pragma once

#include <memory>
#include <string>

#include "cp/storage/store.h"

namespace fltest {

enum class Backend { Sqlite, Postgres };
[[nodiscard]] std::string backend_name(Backend b);

// A new empty database's URL, removed (SQLite) when the TestDatabase goes.
class TestDatabase {
 public:
  explicit TestDatabase(Backend b);
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;
  [[nodiscard]] const std::string& url() const { return url_; }
  // A Store over it (migrated), or a test failure.
  [[nodiscard]] std::unique_ptr<faultline::cp::Store> open() const;

 private:
  std::string url_;
  std::string sqlite_dir_;
};

}  // namespace fltest
