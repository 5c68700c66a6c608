// Fresh databases for the control-plane tests.
#include "cp_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "pg_cluster.h"

namespace fltest {

std::string backend_name(Backend b) { return b == Backend::Sqlite ? "sqlite" : "postgres"; }

TestDatabase::TestDatabase(Backend b) {
  static std::atomic<int> counter{0};
  if (b == Backend::Sqlite) {
    char tmpl[] = "/tmp/fl-cp-sqlite-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    sqlite_dir_ = tmpl;
    url_ = "sqlite:" + sqlite_dir_ + "/faultcp.db";
  } else {
    url_ = shared_pg_cluster().create_database("t" + std::to_string(::getpid()) + "_" + std::to_string(++counter));
  }
}

TestDatabase::~TestDatabase() {
  std::error_code ec;
  if (!sqlite_dir_.empty()) std::filesystem::remove_all(sqlite_dir_, ec);
}

std::unique_ptr<faultline::cp::Store> TestDatabase::open() const {
  auto s = faultline::cp::Store::open(url_);
  if (!s) {
    ADD_FAILURE() << "opening " << url_ << ": " << s.error().describe();
    return nullptr;
  }
  return std::move(*s);
}

}  // namespace fltest
