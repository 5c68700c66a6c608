// The state folder (/run/faultline), and IDs in it that are never handed out
// twice (r1, s2, g3, ...).
#pragma once

#include <string>

#include "base/files.h"
#include "base/result.h"
#include "base/run_dir.h"

namespace faultline {

// prefix + the next number kept in counter_path (created at 1), under a lock:
// "r1", "r2", ... never reused for the life of the folder.
[[nodiscard]] Result<std::string> next_id(const std::string& counter_path, const std::string& prefix);

}  // namespace faultline
