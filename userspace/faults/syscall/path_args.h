// --path for syscall faults: which argument of a file syscall names a path (and
// which names the directory it is relative to), and how a path the call names
// is matched against the operator's prefixes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace faultline {

// One path a syscall names: argument `path` (a char*), relative to the
// directory fd in argument `dirfd`, or to the caller's cwd when dirfd is -1.
struct PathArg {
  int path = 0;
  int dirfd = -1;
};

// The file syscalls --path applies to, and their path arguments (one, or two
// for rename/link: a call matches if either path does). Empty: the syscall
// takes no path (or is not in the table), so --path cannot apply to it.
[[nodiscard]] std::vector<PathArg> path_args_of(std::string_view syscall);

// The names in the table, comma-separated, for error messages and docs.
[[nodiscard]] std::string path_syscall_names();

// Lexical normalization of an absolute path: "//" and "/./" collapse, ".."
// drops the component before it ("/.." stays "/"), a trailing "/" goes (but
// "/" stays). Symlinks are not followed: this never touches the file system.
[[nodiscard]] std::string normalize_path(std::string_view absolute);

// `rel` against the absolute directory `base`, normalized; an absolute `rel`
// ignores `base`; an empty `rel` is `base` itself (AT_EMPTY_PATH).
[[nodiscard]] std::string resolve_path(std::string_view base, std::string_view rel);

// True if the normalized path is the normalized prefix or below it, on
// component boundaries: "/tmp/a" is under "/tmp/a" and "/tmp", not under "/tmp/ab".
[[nodiscard]] bool under_prefix(std::string_view path, std::string_view prefix);

}  // namespace faultline
