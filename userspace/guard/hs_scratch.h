// Hyperscan's scratch space, one per thread, shared by every database the
// thread scans with (the DLP engine's, the rule index's paths): a scratch
// only grows, so once fitted to a database it stays fit for it.
#pragma once

#include <cstdint>

struct hs_database;
struct hs_scratch;

namespace faultline {

// A number no other database of this process has had: a database's address
// may be reused after it is freed, its serial is not.
[[nodiscard]] uint64_t hs_next_serial();

// This thread's scratch, grown to fit `db` (serial: hs_next_serial() of it)
// the first time it is asked for it; null when Hyperscan cannot allocate it.
[[nodiscard]] hs_scratch* hs_thread_scratch(const hs_database* db, uint64_t serial);

}  // namespace faultline
