// The anomaly baseline: hosts learned in the warm-up, new ones flagged once after it.
#include "userspace/guard/anomaly.h"

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

size_t AnomalyWatch::learned() const {
  std::lock_guard lock(mu_);
  return learned_.size();
}

}  // namespace faultline
