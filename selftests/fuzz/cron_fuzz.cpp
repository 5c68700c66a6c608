// libFuzzer target: a cron expression as a schedule's body carries it, any
// bytes: parsed (or refused naming a field), and when it parses its next
// firings in a zone with DST (Europe/Paris) and in UTC must move forward.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "userspace/orchestration/cron.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto paris = std::get<faultline::CronZone>(faultline::CronZone::find("Europe/Paris"));
  static const auto utc = std::get<faultline::CronZone>(faultline::CronZone::find("UTC"));
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = faultline::CronSchedule::parse(text);
  if (auto* e = std::get_if<faultline::CronError>(&parsed)) {
    if (e->field.empty() || e->message.empty()) __builtin_trap();
    return 0;
  }
  const auto& cron = std::get<faultline::CronSchedule>(parsed);
  for (const auto* zone : {&paris, &utc}) {
    int64_t t = 1'774'742'400;  // 2026-03-29, a DST change in Paris
    for (int i = 0; i < 3; ++i) {
      auto next = cron.next_after(t, *zone);
      if (!next) break;
      if (*next <= t) __builtin_trap();
      t = *next;
    }
  }
  // A zone name is read from the same bytes: refused or found, never a crash.
  (void)faultline::CronZone::find(text);
  return 0;
}
