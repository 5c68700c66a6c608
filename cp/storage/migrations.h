// The schema, as numbered migrations run on start: each runs once, in order,
// inside one transaction with its row in schema_migrations, so a second start
// (or a second replica racing the first) applies nothing twice.
#pragma once

#include "base/result.h"
#include "cp/storage/sql_connection.h"

namespace faultline::cp {

// The version this build's schema has after migrate().
[[nodiscard]] int64_t latest_schema_version();
// Applies the missing migrations up to `up_to` (tests stop at an older
// version to upgrade from it); returns the version the database is at.
[[nodiscard]] Result<int64_t> migrate(SqlConnection& db, int64_t up_to = latest_schema_version());

}  // namespace faultline::cp
