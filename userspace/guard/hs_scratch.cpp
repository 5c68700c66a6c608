#include "userspace/guard/hs_scratch.h"

#include <hs/hs.h>

#include <algorithm>
#include <array>
#include <atomic>

namespace faultline {

uint64_t hs_next_serial() {
  static std::atomic<uint64_t> serials{0};
  return ++serials;
}

hs_scratch_t* hs_thread_scratch(const hs_database_t* db, uint64_t serial) {
  thread_local struct Holder {
    hs_scratch_t* s = nullptr;
    // The last databases the scratch was fitted to, newest last. A database
    // beyond these costs one more hs_alloc_scratch(), which returns at once
    // when the scratch is large enough already.
    std::array<uint64_t, 8> fitted{};
    ~Holder() {
      if (s) hs_free_scratch(s);
    }
  } holder;
  if (holder.s && std::find(holder.fitted.begin(), holder.fitted.end(), serial) != holder.fitted.end()) return holder.s;
  if (hs_alloc_scratch(db, &holder.s) != HS_SUCCESS) return nullptr;
  std::rotate(holder.fitted.begin(), holder.fitted.begin() + 1, holder.fitted.end());
  holder.fitted.back() = serial;
  return holder.s;
}

}  // namespace faultline
