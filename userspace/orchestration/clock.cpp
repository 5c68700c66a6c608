// The host's wall clock for the orchestration.
#include "userspace/orchestration/clock.h"

#include <ctime>

namespace faultline {

int64_t SystemClock::now_unix_s() const { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace faultline
