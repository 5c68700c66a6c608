// Which backend a --database URL names.
#include "cp/storage/sql_connection.h"

namespace faultline::cp {

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
