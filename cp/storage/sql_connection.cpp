// Which backend a --database URL names.
#include "cp/storage/sql_connection.h"

namespace faultline::cp {

Status SqlConnection::begin_exclusive(int64_t lock_key) {
  if (depth_ > 0) {
    FL_TRY(lock_inner(lock_key));
    ++depth_;
    return {};
  }
  FL_TRY(begin_outer(lock_key));
  depth_ = 1;
  doomed_ = false;
  return {};
}

Status SqlConnection::commit() {
  if (depth_ == 0) return make_error(0, "COMMIT outside a transaction");
  if (--depth_ > 0) return {};
  if (doomed_) {
    (void)query("ROLLBACK");
    return make_error(0, "rolled back: a step inside the transaction failed");
  }
  auto r = query("COMMIT");
  if (!r) {
    (void)query("ROLLBACK");
    return r.error();
  }
  return {};
}

void SqlConnection::rollback() {
  if (depth_ == 0) return;
  if (--depth_ > 0) {
    doomed_ = true;
    return;
  }
  (void)query("ROLLBACK");
}

Result<std::unique_ptr<SqlConnection>> open_database(const std::string& url) {
  if (url.rfind("sqlite:", 0) == 0) {
    const std::string path = url.substr(7);
    if (path.empty()) return input_error(0, "--database sqlite:PATH: the path is empty");
    return open_sqlite(path);
  }
  if (url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0) return open_postgres(url);
  return input_error(0, "--database '" + url + "': expected sqlite:PATH or postgres://...");
}

}  // namespace faultline::cp
