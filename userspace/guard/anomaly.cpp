// The anomaly baseline: hosts, programs, tools and the token rate learned in
// the warm-up; new ones (and a rate over the factor) flagged once after it.
#include "userspace/guard/anomaly.h"

#include <algorithm>
#include <cctype>

namespace faultline {

AnomalyWatch::AnomalyWatch(std::chrono::milliseconds learn, Clock::time_point start)
    : learn_(learn), until_(start + learn) {}

bool AnomalyWatch::new_item(std::string_view kind, std::string_view item, Clock::time_point now) {
  std::string h(item);
  if (kind == "host")
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  h = std::string(kind) + " " + h;
  std::lock_guard lock(mu_);
  if (now < until_) {
    learned_.insert(std::move(h));
    return false;
  }
  if (learned_.count(h) != 0) return false;
  return flagged_.insert(std::move(h)).second;
}

std::optional<std::string> AnomalyWatch::note_tokens(uint64_t tokens, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (now < until_) {
    warmup_tokens_ += tokens;
    return std::nullopt;
  }
  if (rate_flagged_) return std::nullopt;
  recent_.emplace_back(now, tokens);
  recent_tokens_ += tokens;
  while (!recent_.empty() && recent_.front().first <= now - std::chrono::minutes(1)) {
    recent_tokens_ -= recent_.front().second;
    recent_.pop_front();
  }
  // Tokens a minute over the whole warm-up (its length in ms, at least 1).
  const auto learn_ms = static_cast<uint64_t>(std::max<int64_t>(learn_.count(), 1));
  const uint64_t baseline = warmup_tokens_ * 60'000 / learn_ms;
  const uint64_t limit = std::max(baseline * kTokenDriftFactor, kTokenRateFloor);
  if (recent_tokens_ <= limit) return std::nullopt;
  rate_flagged_ = true;
  recent_.clear();
  return std::to_string(recent_tokens_) + " tokens in the last minute, over " + std::to_string(kTokenDriftFactor) +
         "x the warm-up's " + std::to_string(baseline) + " a minute (limit " + std::to_string(limit) + ")";
}

size_t AnomalyWatch::learned() const {
  std::lock_guard lock(mu_);
  return learned_.size();
}

}  // namespace faultline
