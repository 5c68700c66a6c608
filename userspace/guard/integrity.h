// `faultctl guard --integrity PATH`: SHA-256 baselines of the files an agent
// is steered by (CLAUDE.md, skills, memory folders), taken at start and
// re-checked; each file created, changed or removed since the last check is
// one change. docs/detectors.md, "Integrity".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

enum class IntegrityChangeKind : uint8_t { created, modified, removed };
[[nodiscard]] const char* integrity_change_name(IntegrityChangeKind k);  // "created", "modified", "removed"

struct IntegrityChange {
  IntegrityChangeKind kind = IntegrityChangeKind::modified;
  std::string path;    // as watched: the PATH given, or PATH/below for a file of a tree
  std::string before;  // the file's digest ("" when it did not exist)
  std::string after;   // its digest now ("" when it is gone)
};

// The digests of the regular files named (a file, or every regular file of a
// folder tree; symbolic links are not followed). A file that cannot be read
// has the digest "unreadable: <reason>", so that it becoming readable, or
// unreadable, is a change too.
class IntegrityBaseline {
 public:
  // Each PATH must exist, or name a file whose folder does (its creation is
  // then a change); anything else is an error naming it.
  [[nodiscard]] static Result<IntegrityBaseline> take(std::vector<std::string> paths);
  // The changes since the last check (or the baseline), and the baseline
  // moves to now: a change is reported once.
  [[nodiscard]] std::vector<IntegrityChange> recheck();
  [[nodiscard]] size_t files() const { return digests_.size(); }
  [[nodiscard]] const std::vector<std::string>& paths() const { return paths_; }

 private:
  [[nodiscard]] std::map<std::string, std::string> scan() const;
  std::vector<std::string> paths_;
  std::map<std::string, std::string> digests_;  // path -> lowercase hex SHA-256
};

// The hex SHA-256 of a file's bytes, read in blocks.
[[nodiscard]] Result<std::string> sha256_file(const std::string& path);
// A file's digest as a baseline keeps it: its SHA-256, or "unreadable: <reason>".
[[nodiscard]] std::string integrity_digest(const std::string& path);

}  // namespace faultline
