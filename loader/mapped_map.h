// A BPF array map created with BPF_F_MMAPABLE, mapped into this process: its
// values are read and written in place, no syscall per element. Unmapped once.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

#include "base/result.h"

namespace faultline {

class MappedMap {
 public:
  // Maps the first `bytes` of the map's value area, read-write and shared.
  [[nodiscard]] static Result<MappedMap> map(int map_fd, size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
    if (p == MAP_FAILED) return errno_error("cannot mmap a BPF array map");
    return MappedMap(p, bytes);
  }
  MappedMap(MappedMap&& o) noexcept : addr_(std::exchange(o.addr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  MappedMap& operator=(MappedMap&& o) noexcept {
    if (this != &o) {
      unmap();
      addr_ = std::exchange(o.addr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  MappedMap(const MappedMap&) = delete;
  MappedMap& operator=(const MappedMap&) = delete;
  ~MappedMap() { unmap(); }

  template <typename T>
  [[nodiscard]] T* as() const {
    return static_cast<T*>(addr_);
  }
  [[nodiscard]] size_t size() const { return bytes_; }

 private:
  MappedMap(void* addr, size_t bytes) : addr_(addr), bytes_(bytes) {}
  void unmap() {
    if (addr_ != nullptr) ::munmap(addr_, bytes_);
    addr_ = nullptr;
  }
  void* addr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace faultline
