// The attempt counter: a map from fingerprint to its sightings, pruned as it
// grows so that a client sending ever new requests cannot grow it without end.
#include "userspace/proxy/attempt_counter.h"

#include <algorithm>

namespace faultline {
namespace {

// Past this many tracked requests, expired ones are dropped; then, if still
// full, the map starts over (a lost chain faults one attempt too many, never
// lets a first attempt through).
constexpr size_t kMaxTracked = 4096;

}  // namespace

void BodyHash::update(std::string_view bytes) {
  for (unsigned char c : bytes) {
    h_ ^= c;
    h_ *= 0x100000001b3ULL;
  }
}

std::string AttemptCounter::key_of(const RequestFingerprint& fp) {
  std::string k;
  k.reserve(fp.client.size() + fp.method.size() + fp.path.size() + 20);
  k.append(fp.client).append(1, '\0').append(fp.method).append(1, '\0').append(fp.path).append(1, '\0');
  k.append(std::to_string(fp.body_hash));
  return k;
}

void AttemptCounter::prune(Clock::time_point now) {
  if (seen_.size() < kMaxTracked) return;
  std::erase_if(seen_, [&](const auto& kv) { return now - kv.second.last > window_; });
  if (seen_.size() >= kMaxTracked) seen_.clear();
}

int64_t AttemptCounter::attempt(const RequestFingerprint& fp, int64_t header_retry, Clock::time_point now) {
  std::lock_guard lock(mu_);
  prune(now);
  Seen& s = seen_[key_of(fp)];
  if (s.attempts > 0 && now - s.last > window_) s.attempts = 0;  // too long ago: a new request
  const int64_t n = std::max(s.attempts, header_retry);
  s.attempts = n + 1;
  s.last = now;
  return n;
}

void AttemptCounter::settle(const RequestFingerprint& fp) {
  std::lock_guard lock(mu_);
  seen_.erase(key_of(fp));
}

size_t AttemptCounter::tracked() {
  std::lock_guard lock(mu_);
  return seen_.size();
}

}  // namespace faultline
