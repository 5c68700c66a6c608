// A proxy's toxics as the workers see them (an immutable set, swapped whole), and
// what they fold into for one direction of one connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "userspace/proxy/http_session.h"
#include "userspace/proxy/toxic.h"

namespace faultline {

// A toxic with its identity: `uid` survives updates of the toxic (so a
// connection's toxicity draw stays the same), and so does its activation counter;
// `version` is new on every add or update and restarts the toxic's clocks.
// first_n: `added_ns` (CLOCK_MONOTONIC) is when the toxic was added, and only
// connections accepted from then on are counted; `first_n_taken` counts the
// slots handed out, across the workers (it survives updates, as the uid).
struct ToxicEntry {
  Toxic toxic;
  uint64_t uid = 0;
  uint64_t version = 0;
  std::shared_ptr<std::atomic<uint64_t>> activations;
  uint64_t added_ns = 0;
  std::shared_ptr<std::atomic<uint64_t>> first_n_taken = std::make_shared<std::atomic<uint64_t>>(0);
};

// Immutable once published: a worker swaps its pointer to a new set and every
// connection notices the change at its next chunk (pointer comparison).
struct ToxicSet {
  std::vector<ToxicEntry> toxics;
  // Set once the proxy is in HTTP mode (it got an HTTP fault): connections
  // accepted from then on are parsed as HTTP/1.1 (docs/l7.md).
  std::shared_ptr<const HttpRules> http;
};

// What one direction of one connection does, the toxics that apply to it combined:
// latencies and jitters add, the lowest rate wins, slow_close delays add, the
// smallest limit wins, the first slicer applies, slow_open delays add, and a
// reset_peer's clock takes precedence over a timeout's or a limit_time's (of
// those, the first toxic's clock runs).
struct DirectionPlan {
  int64_t latency_ms = 0;
  int64_t jitter_ms = 0;
  int64_t rate_kbps = 0;  // 0: unlimited
  bool slicer = false;
  SlicerToxic slicer_v{};
  int64_t limit_bytes = -1;  // -1: no limit
  bool hold = false;         // a timeout toxic: nothing passes
  int64_t slow_close_ms = 0;
  uint64_t deadline_key = 0;  // the version of the reset_peer or timeout whose clock runs (0: none)
  int64_t deadline_ms = 0;
  bool deadline_reset = false;  // the clock ends in an RST (reset_peer), else a close (timeout, limit_time)
  int64_t open_delay_ms = 0;    // slow_open: the upstream connect waits this long from the accept
  std::vector<uint64_t> uids;   // the toxics that apply
  // first_n toxics that this connection was judged past (no slot, or open
  // before the toxic came): the judgement is kept for the connection's life.
  std::vector<uint64_t> passed_by;
};

// Whether a toxic applies to a connection: a draw fixed by the pair (connection
// seed, toxic uid), so it is decided once per connection and raising the
// toxicity only adds connections.
[[nodiscard]] bool toxic_applies(uint64_t conn_seed, uint64_t toxic_uid, double toxicity);

// The plan of one direction under `set`. Every toxic that applies and is not in
// `before` (the plan it replaces) counts one activation. A first_n toxic met
// for the first time takes a slot if the connection was accepted (`accepted_ns`,
// CLOCK_MONOTONIC) after the toxic was added and one is left; `before` keeps
// what was decided.
[[nodiscard]] DirectionPlan plan_direction(const ToxicSet& set, Stream stream, uint64_t conn_seed,
                                           const DirectionPlan& before, uint64_t accepted_ns = 0);

[[nodiscard]] uint64_t splitmix64(uint64_t x);

// The longest duration a toxic attribute stands for here (about 31 years):
// each is capped at it, and sums saturate at it, so no value a client sends
// wraps a nanosecond clock (Toxiproxy's would). Larger is "forever" anyway.
inline constexpr int64_t kToxicMaxMs = 1'000'000'000'000;

// The slicer: the length of the next slice of a `len`-byte piece. A piece no
// longer than average_size + size_variation passes whole (Toxiproxy's rule: it
// stops splitting within the variation); a longer one is cut into slices of
// average_size +- size_variation (uniform from `draw`), at least 1 byte. Any
// sizes are safe: Toxiproxy's recursive cut can fall outside the piece when the
// variation passes the average, and recurses forever on a 0 average, where
// here the slice is kept within [1, len].
[[nodiscard]] uint64_t split_slice(uint64_t len, const SlicerToxic& s, uint64_t draw);

}  // namespace faultline
