// Another process's memory, read with process_vm_readv(2): the strings and
// pointer arrays a syscall names, as a seccomp supervisor sees them. Whatever
// is read may change under the reader; a supervisor trusts it only if the
// call is still pending afterwards (SECCOMP_IOCTL_NOTIF_ID_VALID).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace faultline {

// A NUL-terminated string at addr in pid, at most max bytes, read a page at a
// time (a string may end just before an unmapped page). None when unreadable
// or not terminated within max.
[[nodiscard]] std::optional<std::string> read_remote_string(pid_t pid, uint64_t addr, size_t max);

// The NULL-terminated array of pointers at addr in pid (an argv), at most max
// entries before the NULL. None when unreadable or longer.
[[nodiscard]] std::optional<std::vector<uint64_t>> read_remote_pointers(pid_t pid, uint64_t addr, size_t max);

}  // namespace faultline
