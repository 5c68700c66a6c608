#include "base/clock.h"

#include <time.h>

#include <cmath>
#include <cstdio>

namespace faultline {
namespace {

uint64_t read_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

uint64_t boottime_ns() { return read_ns(CLOCK_BOOTTIME); }
uint64_t monotonic_ns() { return read_ns(CLOCK_MONOTONIC); }
uint64_t coarse_monotonic_ns() { return read_ns(CLOCK_MONOTONIC_COARSE); }

double wall_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string iso8601(double wall_s) {
  time_t t = static_cast<time_t>(wall_s);
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[64];
  int ms = static_cast<int>(std::fmod(wall_s, 1.0) * 1000);
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, ms);
  return buf;
}

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  nanosleep(&ts, nullptr);
}

}  // namespace faultline
