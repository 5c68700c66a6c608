// The state folder's file discipline, shared by every kind of state kept there:
// private folders, atomic replacement, and IDs that are never handed out twice.
#pragma once

#include <string>

#include "loader/result.h"

namespace faultline {

// The folder exists (made mode 0700 if create), is a directory, is ours and
// nobody else can write to it: its files tell root what to kill and delete.
[[nodiscard]] Status ensure_private_dir(const std::string& path, bool create);

// Writes all of text to fd, through EINTR and short writes; `what` names the file in errors.
[[nodiscard]] Status write_all(int fd, const std::string& text, const std::string& what);

// Writes a sibling temporary file, fsyncs it and renames it over path.
[[nodiscard]] Status write_file_atomic(const std::string& path, const std::string& text);

// prefix + the next number kept in counter_path (created at 1), under a lock:
// "r1", "r2", ... never reused for the life of the folder.
[[nodiscard]] Result<std::string> next_id(const std::string& counter_path, const std::string& prefix);

}  // namespace faultline
