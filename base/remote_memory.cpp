// process_vm_readv a page (or a pointer) at a time.
#include "base/remote_memory.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

namespace faultline {

std::optional<std::string> read_remote_string(pid_t pid, uint64_t addr, size_t max) {
  constexpr size_t kPage = 4096;  // every page size is a multiple of it
  std::string out;
  char buf[kPage];
  while (out.size() < max) {
    const size_t want = std::min(kPage - addr % kPage, max - out.size());
    iovec local{buf, want};
    iovec remote{reinterpret_cast<void*>(addr), want};
    const ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) return std::nullopt;
    const auto* nul = static_cast<const char*>(std::memchr(buf, '\0', static_cast<size_t>(n)));
    if (nul != nullptr) return out.append(buf, static_cast<size_t>(nul - buf));
    out.append(buf, static_cast<size_t>(n));
    addr += static_cast<uint64_t>(n);
  }
  return std::nullopt;
}

std::optional<std::vector<uint64_t>> read_remote_pointers(pid_t pid, uint64_t addr, size_t max) {
  std::vector<uint64_t> out;
  constexpr size_t kBatch = 64;
  uint64_t buf[kBatch];
  for (;;) {
    // Up to the end of addr's page, so a short array before an unmapped page reads.
    const size_t to_page_end = (4096 - addr % 4096) / sizeof(uint64_t);
    const size_t want = std::max<size_t>(1, std::min(kBatch, to_page_end));
    iovec local{buf, want * sizeof(uint64_t)};
    iovec remote{reinterpret_cast<void*>(addr), want * sizeof(uint64_t)};
    const ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < static_cast<ssize_t>(sizeof(uint64_t))) return std::nullopt;
    const size_t got = static_cast<size_t>(n) / sizeof(uint64_t);
    for (size_t i = 0; i < got; ++i) {
      if (buf[i] == 0) return out;
      if (out.size() >= max) return std::nullopt;
      out.push_back(buf[i]);
    }
    addr += got * sizeof(uint64_t);
  }
}

}  // namespace faultline
