// Whole-file reads and writes, atomic replacement, and private folders: the file
// discipline of the state folder, of procfs and of cgroupfs.
#pragma once

#include <string>

#include "base/result.h"

namespace faultline {

// Small files where the whole file is one value (procfs, cgroupfs, state).
[[nodiscard]] Result<std::string> read_text_file(const std::string& path);
[[nodiscard]] Status write_text_file(const std::string& path, const std::string& text);

// Writes all of text to fd, through EINTR and short writes; `what` names the file in errors.
[[nodiscard]] Status write_all(int fd, const std::string& text, const std::string& what);

// Writes a sibling temporary file, fsyncs it and renames it over path.
[[nodiscard]] Status write_file_atomic(const std::string& path, const std::string& text);

// The folder exists (made mode 0700 if create), is a directory, is ours and
// nobody else can write to it: its files tell root what to kill and delete.
[[nodiscard]] Status ensure_private_dir(const std::string& path, bool create);

}  // namespace faultline
