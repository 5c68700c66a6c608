// Folding a toxic set into one direction's plan.
#include "userspace/proxy/toxic_plan.h"

#include <algorithm>

namespace faultline {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {

// An attribute as the relay runs it: negative as 0 (Toxiproxy's toxics wait
// "a negative time", i.e. not at all), capped so that sums cannot overflow.
int64_t clamped(int64_t v, int64_t cap = kToxicMaxMs) { return std::clamp<int64_t>(v, 0, cap); }
int64_t saturating_add(int64_t a, int64_t b) { return std::min(a + b, kToxicMaxMs); }

}  // namespace

uint64_t split_slice(uint64_t len, const SlicerToxic& s, uint64_t draw) {
  // Sizes past 1 GiB are "never split" in practice; the cap keeps the sums exact.
  const uint64_t average = uint64_t(clamped(s.average_size, int64_t(1) << 30));
  const uint64_t variation = uint64_t(clamped(s.size_variation, int64_t(1) << 30));
  const uint64_t most = std::max<uint64_t>(average + variation, 1);
  if (len <= most) return len;
  const uint64_t least = average > variation ? average - variation : 1;
  return least + splitmix64(draw) % (most - least + 1);
}

bool toxic_applies(uint64_t conn_seed, uint64_t toxic_uid, double toxicity) {
  if (toxicity >= 1.0) return true;
  if (toxicity <= 0.0) return false;
  double u = double(splitmix64(conn_seed ^ (toxic_uid * 0x2545f4914f6cdd1dULL)) >> 11) * 0x1.0p-53;
  return u < toxicity;
}

namespace {

bool holds(const std::vector<uint64_t>& uids, uint64_t uid) {
  return std::find(uids.begin(), uids.end(), uid) != uids.end();
}

// first_n: whether the connection gets one of the toxic's first N slots. Asked
// once per (connection, toxic); the answer is carried in the plan after.
bool takes_first_n_slot(const ToxicEntry& e, int64_t first_n, uint64_t accepted_ns) {
  if (accepted_ns < e.added_ns) return false;  // open before the toxic came: not counted
  uint64_t taken = e.first_n_taken->load(std::memory_order_relaxed);
  do {
    if (taken >= uint64_t(first_n)) return false;
  } while (!e.first_n_taken->compare_exchange_weak(taken, taken + 1, std::memory_order_relaxed));
  return true;
}

}  // namespace

DirectionPlan plan_direction(const ToxicSet& set, Stream stream, uint64_t conn_seed, const DirectionPlan& before,
                             uint64_t accepted_ns) {
  DirectionPlan next;
  for (const ToxicEntry& e : set.toxics) {
    if (e.toxic.stream != stream || !toxic_applies(conn_seed, e.uid, e.toxic.toxicity)) continue;
    const bool applied_before = holds(before.uids, e.uid);
    if (const int64_t first_n = first_n_of(e.toxic.attributes); first_n > 0 && !applied_before) {
      if (holds(before.passed_by, e.uid) || !takes_first_n_slot(e, first_n, accepted_ns)) {
        next.passed_by.push_back(e.uid);
        continue;
      }
    }
    next.uids.push_back(e.uid);
    if (!applied_before) e.activations->fetch_add(1, std::memory_order_relaxed);
    const auto& a = e.toxic.attributes;
    if (const auto* t = std::get_if<LatencyToxic>(&a)) {
      next.latency_ms = saturating_add(next.latency_ms, clamped(t->latency_ms));
      next.jitter_ms = saturating_add(next.jitter_ms, clamped(t->jitter_ms));
    } else if (const auto* t = std::get_if<BandwidthToxic>(&a)) {
      const int64_t rate = clamped(t->rate_kbps);
      if (rate > 0) next.rate_kbps = next.rate_kbps > 0 ? std::min(next.rate_kbps, rate) : rate;
    } else if (const auto* t = std::get_if<SlowCloseToxic>(&a)) {
      next.slow_close_ms = saturating_add(next.slow_close_ms, clamped(t->delay_ms));
    } else if (const auto* t = std::get_if<TimeoutToxic>(&a)) {
      next.hold = true;
      if (t->timeout_ms > 0 && next.deadline_key == 0) {
        next.deadline_key = e.version;
        next.deadline_ms = clamped(t->timeout_ms);
        next.deadline_reset = false;
      }
    } else if (const auto* t = std::get_if<LimitTimeToxic>(&a)) {
      if (next.deadline_key == 0) {  // as a timeout's clock, without the hold
        next.deadline_key = e.version;
        next.deadline_ms = clamped(t->time_ms);
        next.deadline_reset = false;
      }
    } else if (const auto* t = std::get_if<SlowOpenToxic>(&a)) {
      next.open_delay_ms = saturating_add(next.open_delay_ms, clamped(t->delay_ms));
    } else if (const auto* t = std::get_if<ResetPeerToxic>(&a)) {
      if (!next.deadline_reset) {  // the first reset_peer, over any timeout
        next.deadline_key = e.version;
        next.deadline_ms = clamped(t->timeout_ms);
        next.deadline_reset = true;
      }
    } else if (const auto* t = std::get_if<SlicerToxic>(&a)) {
      if (!next.slicer) {
        next.slicer = true;
        next.slicer_v = *t;
        next.slicer_v.delay_us = clamped(t->delay_us, kToxicMaxMs * 1000);
      }
    } else if (const auto* t = std::get_if<LimitDataToxic>(&a)) {
      const int64_t bytes = clamped(t->bytes, INT64_MAX);  // negative: nothing passes, as Toxiproxy's
      next.limit_bytes = next.limit_bytes < 0 ? bytes : std::min(next.limit_bytes, bytes);
    }
  }
  return next;
}

}  // namespace faultline
