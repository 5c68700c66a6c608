// Whole-file reads and writes, atomic replacement, and private folders: the file
// discipline of the state folder, of procfs and of cgroupfs.
#pragma once

#include <string>
#include <utility>

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

// A fresh folder under $TMPDIR (or /tmp), mode 0755, removed with what is in it
// when the object goes: files a run hands to the command it wraps.
class TempFolder {
 public:
  [[nodiscard]] static Result<TempFolder> create(const std::string& prefix);
  TempFolder(TempFolder&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  TempFolder& operator=(TempFolder&&) = delete;
  TempFolder(const TempFolder&) = delete;
  ~TempFolder();
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  explicit TempFolder(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace faultline
